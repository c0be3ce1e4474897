package e2ekcp

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/cluster"
	"github.com/openmcp-project/kcp-serviceprovider/provider"
	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// replicaRecordEnv names a folder: a replica started with it records every call of
// the widget provider in <folder>/<replica>, one line each: the workspace and when
// the call began and ended.
const replicaRecordEnv = "KSP_E2E_REPLICA_RECORD"

// recordingProvider is the widget provider, recording its calls (replicaRecordEnv).
type recordingProvider struct {
	widget.Provider
	file *os.File
}

// withRecording returns p recording into the folder the environment names, or p.
func withRecording(p widget.Provider, replica string) (provider.Reconciler[*widget.Widget], error) {
	dir := os.Getenv(replicaRecordEnv)
	if dir == "" {
		return p, nil
	}
	f, err := os.OpenFile(filepath.Join(dir, replica), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	return recordingProvider{Provider: p, file: f}, nil
}

func (p recordingProvider) CreateOrUpdate(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	defer p.record(ctx, time.Now())
	return p.Provider.CreateOrUpdate(ctx, w)
}

func (p recordingProvider) Delete(ctx context.Context, w *widget.Widget) (provider.Result, error) {
	defer p.record(ctx, time.Now())
	return p.Provider.Delete(ctx, w)
}

// record writes one line with a single write, so that a killed process loses no
// call it finished.
func (p recordingProvider) record(ctx context.Context, began time.Time) {
	line := fmt.Sprintf("%s %d %d\n", cluster.IdentityFromCtx(ctx).Name, began.UnixNano(), time.Now().UnixNano())
	_, _ = p.file.WriteString(line)
}

// call is one recorded call of the provider.
type call struct {
	replica, workspace string
	began, ended       time.Time
}

// recordedCalls reads what the replicas recorded in dir.
func recordedCalls(t testing.TB, dir string) []call {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var calls []call
	for _, e := range entries {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		for s.Scan() {
			fields := strings.Fields(s.Text())
			if len(fields) != 3 {
				continue // a line a killed process did not finish
			}
			b, err1 := strconv.ParseInt(fields[1], 10, 64)
			en, err2 := strconv.ParseInt(fields[2], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			calls = append(calls, call{replica: e.Name(), workspace: fields[0], began: time.Unix(0, b), ended: time.Unix(0, en)})
		}
		_ = f.Close()
	}
	return calls
}

// pause is a replica stopped with SIGSTOP at stopped and continued at continued.
type pause struct {
	replica            string
	stopped, continued time.Time
}

// overlappingCalls returns every two calls of different replicas in one workspace
// that overlap in time, split in those a pause excuses (the paused replica's call
// was in flight when it was stopped and ended after another replica took over: the
// documented bound, docs/design/replicas.md) and the others.
func overlappingCalls(calls []call, pauses []pause) (excused, violations []string) {
	byWorkspace := map[string][]call{}
	for _, c := range calls {
		byWorkspace[c.workspace] = append(byWorkspace[c.workspace], c)
	}
	inFlightAtPause := func(c call) bool {
		return slices.ContainsFunc(pauses, func(p pause) bool {
			return c.replica == p.replica && c.began.Before(p.stopped) && c.ended.After(p.stopped)
		})
	}
	for ws, cs := range byWorkspace {
		slices.SortFunc(cs, func(a, b call) int { return a.began.Compare(b.began) })
		for i, a := range cs {
			for _, b := range cs[i+1:] {
				if !b.began.Before(a.ended) {
					break
				}
				if a.replica == b.replica {
					continue
				}
				msg := fmt.Sprintf("%s: %s %s-%s and %s %s-%s", ws, a.replica, a.began.Format(time.StampMilli), a.ended.Format(time.StampMilli),
					b.replica, b.began.Format(time.StampMilli), b.ended.Format(time.StampMilli))
				if inFlightAtPause(a) || inFlightAtPause(b) {
					excused = append(excused, msg)
				} else {
					violations = append(violations, msg)
				}
			}
		}
	}
	return excused, violations
}
