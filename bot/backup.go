package bot

import (
	"crypto/subtle"
	"net/http"

	"github.com/agentbot/agentbot/store/bolt"
)

// backupHandler serves GET /backup on the running bot: a consistent copy
// of the bbolt file in one read transaction. It holds every secret the
// store does (webhook tokens, transcripts), so it is served only with
// http.token set, and only to that bearer token.
func backupHandler(st Store, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token == "" {
			http.Error(w, "backups over HTTP need http.token set", http.StatusForbidden)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+token)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		b, ok := st.(*bolt.Store)
		if !ok {
			http.Error(w, "the store is not a bbolt file: back it up with pg_dump", http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="bot.db"`)
		// A failure mid-stream aborts the response: the client sees a short
		// body and its verification fails; nothing is renamed into place.
		if _, err := b.WriteTo(w); err != nil {
			panic(http.ErrAbortHandler)
		}
	})
}
