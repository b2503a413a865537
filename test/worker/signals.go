package main

import (
	"log"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// quietSignal quiets the worker, as Sidekiq's TSTP does: it claims no new
// job, finishes the ones in hand, and stays up until its drain signal. The
// two-phase drain of flexiq-scaled sends it first (quiet_signal).
const quietSignal = syscall.SIGTSTP

// loggedSignals are written to the log as they arrive, each with the time,
// so that tests can tell which signal came when. SIGTERM is left out when
// the worker ignores it: asking to be told of it would undo the ignore.
func loggedSignals(ignoreTerm bool) []os.Signal {
	sigs := []os.Signal{quietSignal, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGCONT}
	if !ignoreTerm {
		sigs = append(sigs, syscall.SIGTERM)
	}
	return sigs
}

// watchSignals logs every signal of loggedSignals as
// "signal SIGTSTP at <unix ms>", and sets quiet at the quiet signal.
func watchSignals(logger *log.Logger, ignoreTerm bool, quiet *atomic.Bool) {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, loggedSignals(ignoreTerm)...)
	go func() {
		for s := range ch {
			sig, _ := s.(syscall.Signal)
			logger.Printf("signal %s at %d", unix.SignalName(sig), time.Now().UnixMilli())
			if sig == quietSignal && !quiet.Swap(true) {
				logger.Printf("quiet: no new jobs; finishing the ones in hand")
			}
		}
	}()
}
