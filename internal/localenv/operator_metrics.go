package localenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ReconcileErrors is how often the operator's controller (scheduler's
// "clusterrequest", "accessrequest") returned an error so far, read from its
// controller_runtime_reconcile_errors_total. Each error puts the request into the
// controller's per-item exponential backoff, which a request that is ordered in the
// right order never meets: the tests and the benchmark check this count.
func (o *Operator) ReconcileErrors(ctx context.Context, controller string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.MetricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return 0, fmt.Errorf("reading the openmcp-operator's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("reading the openmcp-operator's metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("parsing the openmcp-operator's metrics: %w", err)
	}
	var sum float64
	if f, ok := families["controller_runtime_reconcile_errors_total"]; ok {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum, nil
}

// ReconcilerError is one "Reconciler error" line of the operator's log: the request
// the controller failed to reconcile and the controller's message. The log holds
// request names and messages, no credentials.
type ReconcilerError struct {
	Namespace, Name, Error string
	// Line is the whole log line.
	Line string
}

// RequestGone says whether the error is about the reconciled request itself having
// been deleted meanwhile (the controller's status write after a requester withdrew
// a request it had just created): it ends, it delays no grant.
func (e ReconcilerError) RequestGone() bool {
	return strings.Contains(e.Error, fmt.Sprintf("%q not found", e.Name))
}

// ReconcilerErrors returns the operator log's "Reconciler error" entries of a
// controller, to say which requests met its backoff and why.
func (o *Operator) ReconcilerErrors(controller string) ([]ReconcilerError, error) {
	data, err := os.ReadFile(o.Log)
	if err != nil {
		return nil, fmt.Errorf("reading the openmcp-operator's log: %w", err)
	}
	var out []ReconcilerError
	for line := range strings.SplitSeq(string(data), "\n") {
		var entry struct {
			Msg, Controller, Namespace, Name, Error string
		}
		if json.Unmarshal([]byte(line), &entry) != nil || entry.Msg != "Reconciler error" || entry.Controller != controller {
			continue
		}
		out = append(out, ReconcilerError{Namespace: entry.Namespace, Name: entry.Name, Error: entry.Error, Line: line})
	}
	return out, nil
}
