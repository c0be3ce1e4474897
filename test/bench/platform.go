package main

import (
	"context"
	"fmt"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// platformRow is one mode and size measured on both platforms in the same run.
type platformRow struct {
	mode            string
	n               int
	operator, stand phase
	operatorFailed  bool
	standFailed     bool
}

// comparePlatforms measures time to Ready on the real openmcp-operator (scheduler and
// access-request controller, with the local platform as cluster provider) and on the
// local platform's stand-in for them, side by side at each size, in both modes. No
// floor and no steady-state window: only the time to Ready is compared.
func comparePlatforms(ctx context.Context, assets string, sizes []int, opts benchOptions, rep *report) []platformRow {
	opts.steady, opts.skipFloor = 0, true
	var rows []platformRow
	for _, mode := range []string{"standard", "kcp"} {
		for _, n := range sizes {
			row := platformRow{mode: mode, n: n}
			for _, standIn := range []bool{false, true} {
				o := opts
				o.standIn = standIn
				which := map[bool]string{false: "operator", true: "stand-in"}[standIn]
				var p phase
				err := run(assets, fmt.Sprintf("platform-%s-%s-%d", mode, which, n), func(env *localenv.Env) error {
					if mode == "standard" {
						var err error
						p, err = runStandard(ctx, env, "this", n, o)
						return err
					}
					r, err := runKCP(ctx, env, n, o)
					if err == nil {
						p = r.rt
					}
					return err
				})
				if err != nil {
					logf("platform %s %s n=%d failed: %v", mode, which, n, err)
					rep.failures = append(rep.failures, fmt.Sprintf("%s mode on the %s, %d objects: %v", mode, which, n, err))
				} else {
					logf("platform %s %s n=%d: %s", mode, which, n, p.total.Round(time.Millisecond))
				}
				if standIn {
					row.stand, row.standFailed = p, err != nil
				} else {
					row.operator, row.operatorFailed = p, err != nil
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// operatorErrors reads how often the operator's controllers failed; -1 without one.
func operatorErrors(ctx context.Context, op *localenv.Operator) float64 {
	if op == nil {
		return -1
	}
	var sum float64
	for _, c := range []string{"clusterrequest", "accessrequest"} {
		n, err := op.ReconcileErrors(ctx, c)
		if err != nil {
			logf("openmcp-operator metrics: %v", err)
			return -1
		}
		sum += n
	}
	return sum
}

func (r *report) platformSection(w func(string, ...any)) {
	w("## The real openmcp-operator against the stand-in scheduler")
	w("")
	w("Every other benchmark run and every test use the real openmcp-operator v1.3.0 (its scheduler and access-request " +
		"controller) with the local platform as the cluster provider (docs/design/real-operator.md). Here the same " +
		"runtime serves the same objects once on it and once on the local platform's stand-in for those two " +
		"controllers, each on fresh servers, in this run. Time runs from the first creation to the last Ready. " +
		"Operator errors: the scheduler's and access-request controller's failed reconciles until convergence; " +
		"each would put a request into the controller's exponential backoff.")
	w("")
	w("| mode | objects | operator: all Ready | p50 / p99 | stand-in: all Ready | p50 / p99 | operator / stand-in (all Ready, p99) | operator errors |")
	w("|---|---|---|---|---|---|---|---|")
	for _, row := range r.platform {
		if row.operatorFailed || row.standFailed {
			w("| %s | %d | %s | | %s | | | |", row.mode, row.n, failedOr(row.operatorFailed, row.operator), failedOr(row.standFailed, row.stand))
			continue
		}
		o, s := row.operator, row.stand
		w("| %s | %d | %s | %s / %s | %s | %s / %s | %s, %s | %.0f |", row.mode, row.n,
			secs(o.total), ms(percentile(o.lat, .5)), ms(percentile(o.lat, .99)),
			secs(s.total), ms(percentile(s.lat, .5)), ms(percentile(s.lat, .99)),
			ratio(o.total.Seconds(), s.total.Seconds()), ratio(percentile(o.lat, .99).Seconds(), percentile(s.lat, .99).Seconds()),
			o.opErrors)
	}
	w("")
	w("| target | measured | verdict |")
	w("|---|---|---|")
	for _, row := range r.platform {
		if row.operatorFailed || row.standFailed || row.n != r.platform[len(r.platform)-1].n {
			continue
		}
		q := row.operator.total.Seconds() / row.stand.total.Seconds()
		w("| %s mode, %d objects: all Ready within 1.3x the stand-in's time | %.2fx | %s |", row.mode, row.n, q, verdict(q <= 1.3))
	}
	var errs float64
	for _, row := range r.platform {
		if !row.operatorFailed && row.operator.opErrors > 0 {
			errs += row.operator.opErrors
		}
	}
	w("| no request waits on an operator controller's backoff | %.0f failed reconciles in all runs on the operator | %s |", errs, verdict(errs == 0))
	w("")
}

func failedOr(failed bool, p phase) string {
	if failed {
		return "failed"
	}
	return secs(p.total)
}
