package sockguard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"
)

// Listen opens a Unix socket at path, replacing a stale one that a killed
// daemon left behind, with the given mode, and group gid unless it is -1.
// Until the chmod the socket has the daemon's UMask=0077 mode: nobody but
// root can connect in between.
func Listen(path string, mode fs.FileMode, gid int) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if gid >= 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			l.Close()
			return nil, err
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Server is an http.Server for h with cfg's limits, whose requests carry
// their connection's Peer (PeerFrom) when served on cfg's Listener.
func (cfg Config) Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if gc, ok := c.(*conn); ok {
				return WithPeer(ctx, gc.peer)
			}
			return ctx // no peer: a handler that needs one refuses
		},
	}
}

// Serve serves h on l, guarded, until ctx ends; then it closes l, waiting
// at most a few seconds for requests under way.
func (cfg Config) Serve(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := cfg.Server(h)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	err := srv.Serve(cfg.Listener(l))
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}
