// Package interrupt turns Ctrl-C into a cancelled context, so a long run stops between
// units of work and saves what it has, as the command line and a run package both need.
package interrupt

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// Context returns a context cancelled by the first SIGINT or SIGTERM (printing notice,
// if any, on stderr first). The returned function stops listening.
func Context(notice string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			if notice != "" {
				fmt.Fprintln(os.Stderr, "umad: interrupt: "+notice)
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sig); cancel() }
}
