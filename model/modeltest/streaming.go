package modeltest

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/agentbot/agentbot/model"
)

// Streaming is a model.Streamer a test drives by hand: every call waits
// for the test to take it (Next) and then emits exactly the chunks the
// test sends, ending when the test ends or fails it, or when the call's
// context ends (then Cancelled is closed and the call returns a canceled
// error).
type Streaming struct {
	calls chan *StreamCall
}

// NewStreaming returns a streaming model with no call yet.
func NewStreaming() *Streaming { return &Streaming{calls: make(chan *StreamCall, 64)} }

var _ model.Streamer = (*Streaming)(nil)

// StreamCall is one model call in progress.
type StreamCall struct {
	Req       model.Request
	events    chan streamEvent
	Cancelled chan struct{}
	sent      strings.Builder
}

type streamEvent struct {
	delta string
	end   *model.Response
	err   error
	ack   chan struct{}
}

// Next waits (up to timeout) for the next call.
func (s *Streaming) Next(timeout time.Duration) (*StreamCall, error) {
	select {
	case c := <-s.calls:
		return c, nil
	case <-time.After(timeout):
		return nil, errors.New("modeltest: the model was not called")
	}
}

// Complete implements model.Provider: the streamed call without a callback.
func (s *Streaming) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	return s.Stream(ctx, req, func(string) {})
}

// Stream implements model.Streamer.
func (s *Streaming) Stream(ctx context.Context, req model.Request, onText func(string)) (model.Response, error) {
	c := &StreamCall{Req: copyRequest(req), events: make(chan streamEvent), Cancelled: make(chan struct{})}
	s.calls <- c
	var text strings.Builder
	for {
		select {
		case <-ctx.Done():
			close(c.Cancelled)
			return model.Response{}, model.NewError("streaming", 0, ctx.Err())
		case ev := <-c.events:
			switch {
			case ev.err != nil:
				close(ev.ack)
				return model.Response{}, ev.err
			case ev.end != nil:
				resp := *ev.end
				if resp.Text == "" && len(resp.ToolCalls) == 0 {
					resp.Text = text.String()
				}
				close(ev.ack)
				return resp, nil
			}
			text.WriteString(ev.delta)
			onText(ev.delta)
			close(ev.ack)
		}
	}
}

func (c *StreamCall) send(ev streamEvent) bool {
	ev.ack = make(chan struct{})
	select {
	case c.events <- ev:
		<-ev.ack
		return true
	case <-c.Cancelled:
		return false
	}
}

// Send emits one piece of text and returns once the caller's callback
// returned; false when the call was cancelled instead.
func (c *StreamCall) Send(delta string) bool {
	ok := c.send(streamEvent{delta: delta})
	if ok {
		c.sent.WriteString(delta)
	}
	return ok
}

// Sent returns the text sent so far.
func (c *StreamCall) Sent() string { return c.sent.String() }

// End ends the call with the text sent (or resp when it has text or tool calls).
func (c *StreamCall) End(resp model.Response) bool { return c.send(streamEvent{end: &resp}) }

// Fail ends the call with err.
func (c *StreamCall) Fail(err error) bool { return c.send(streamEvent{err: err}) }
