package work

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestGroup(t *testing.T) {
	t.Run("close refuses, accepted work still waited for", func(t *testing.T) {
		var g Group
		if !g.Add() {
			t.Fatal("Add refused on an open group")
		}
		g.Close()
		if g.Add() {
			t.Fatal("Add accepted after Close")
		}
		done := make(chan struct{})
		go func() { g.Wait(); close(done) }()
		select {
		case <-done:
			t.Fatal("Wait returned with a unit running")
		default:
		}
		g.Done()
		<-done
	})
	t.Run("follow-up accepted while draining, refused once idle", func(t *testing.T) {
		var g Group
		g.Add()
		var ran atomic.Bool
		go func() {
			if g.Add() { // a follow-up while the first unit still runs
				ran.Store(true)
				g.Done()
			}
			g.Done()
		}()
		g.Wait()
		if !ran.Load() {
			t.Fatal("a follow-up offered while a unit ran was refused")
		}
		if g.Add() {
			t.Fatal("Add accepted after Wait returned")
		}
	})
	t.Run("concurrent add and wait", func(t *testing.T) {
		for range 100 {
			var g Group
			var wg sync.WaitGroup
			var started, finished atomic.Int64
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for g.Add() {
						started.Add(1)
						finished.Add(1)
						g.Done()
					}
				}()
			}
			g.Close()
			g.Wait()
			if started.Load() != finished.Load() {
				t.Fatal("Wait returned with a unit running")
			}
			wg.Wait()
		}
	})
}
