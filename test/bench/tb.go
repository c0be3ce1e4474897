package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
)

// tb is the minimal testing.TB the test harness needs to start servers outside `go
// test`: it logs to stderr, turns Fatal into a panic that run recovers, and runs
// cleanups in reverse order when closed.
type tb struct {
	testing.TB // never set: a method not implemented below panics, as it should
	name       string
	ctx        context.Context

	mu       sync.Mutex
	cleanups []func()
	failed   bool
	verbose  bool
}

// fatal is what Fatal panics with; run tells it from a real panic.
type fatal struct{ msg string }

func newTB(ctx context.Context, name string, verbose bool) *tb {
	return &tb{name: name, ctx: ctx, verbose: verbose}
}

func (t *tb) Helper()                  {}
func (t *tb) Name() string             { return t.name }
func (t *tb) Context() context.Context { return t.ctx }
func (t *tb) TempDir() string {
	d, err := os.MkdirTemp("", "ksp-bench-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}
func (t *tb) Cleanup(f func()) { t.mu.Lock(); t.cleanups = append(t.cleanups, f); t.mu.Unlock() }
func (t *tb) Failed() bool     { t.mu.Lock(); defer t.mu.Unlock(); return t.failed }
func (t *tb) Log(args ...any) {
	if t.verbose {
		fmt.Fprintln(os.Stderr, append([]any{t.name + ":"}, args...)...)
	}
}
func (t *tb) Logf(format string, args ...any) {
	if t.verbose {
		fmt.Fprintf(os.Stderr, t.name+": "+format+"\n", args...)
	}
}
func (t *tb) Error(args ...any) {
	t.fail()
	fmt.Fprintln(os.Stderr, append([]any{t.name + ": ERROR"}, args...)...)
}
func (t *tb) Errorf(format string, args ...any) {
	t.fail()
	fmt.Fprintf(os.Stderr, t.name+": ERROR "+format+"\n", args...)
}
func (t *tb) Fatal(args ...any) { t.fail(); panic(fatal{fmt.Sprint(args...)}) }
func (t *tb) Fatalf(format string, args ...any) {
	t.fail()
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (t *tb) FailNow() { t.fail(); panic(fatal{"FailNow"}) }
func (t *tb) Fail()    { t.fail() }
func (t *tb) fail()    { t.mu.Lock(); t.failed = true; t.mu.Unlock() }

// close runs the cleanups, last registered first.
func (t *tb) close() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

// run calls fn with a fresh tb, closes it afterwards and turns a Fatal into an error.
func run(ctx context.Context, name string, verbose bool, fn func(t *tb) error) (err error) {
	t := newTB(ctx, name, verbose)
	defer t.close()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s: %s", name, f.msg)
		}
	}()
	return fn(t)
}
