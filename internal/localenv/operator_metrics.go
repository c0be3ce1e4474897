package localenv

import (
	"context"
	"fmt"
	"net/http"
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
