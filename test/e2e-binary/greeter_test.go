package e2ebinary

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/greeter"
	"github.com/openmcp-project/kcp-serviceprovider/internal/localenv"
)

// TestGreeterLocal runs the provider that installs through Flux as its README says:
// `greeter local` starts a platform with Flux and a registry holding the chart, the
// real openmcp-operator runs the greeter binary's init and run, and the tenant's
// commands it prints end with a Ready Greeter in a workspace and on the onboarding
// cluster, installed by Flux.
func TestGreeterLocal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	bin := buildBinary(t, "./examples/greeter/cmd/greeter")
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	assets, err := localenv.FindAssets(ctx, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	env := []string{"HOME=" + t.TempDir(), "KUBECONFIG=", localenv.AssetsEnv + "=" + assets}
	start := time.Now()
	local := startProc(t, "greeter-local", bin, []string{"local", "--state-dir=" + state, "--repo-root=" + repo}, env)
	banner := waitFor(ctx, t, local, "Press Ctrl-C", 10*time.Minute)
	t.Logf("local platform with Flux up in %s", time.Since(start).Round(100*time.Millisecond))
	for _, want := range []string{"Helm charts pushed to the local OCI registry", "init (Job sp-greeter-init)", "run (Deployment sp-greeter)"} {
		if !strings.Contains(banner, want) {
			t.Errorf("local did not report %q:\n%s", want, banner)
		}
	}

	kcp, standard, workers := greeter.Quickstart(command.LocalState(state))
	exports := kcp[0]
	for _, step := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"kcp tenant", kcp, "hello from the greeter chart"},
		{"standard tenant", append([]string{exports}, standard...), "helmrelease.helm.toolkit.fluxcd.io/greeter"},
		{"workers", append([]string{exports}, workers...), "greeter"},
	} {
		start := time.Now()
		out := shell(ctx, t, repo, env, strings.Join(step.lines, "\n"))
		t.Logf("%s in %s:\n%s", step.name, time.Since(start).Round(100*time.Millisecond), out)
		if step.name != "workers" && !strings.Contains(out, "condition met") {
			t.Errorf("%s: no Ready Greeter", step.name)
		}
		if !strings.Contains(out, step.want) {
			t.Errorf("%s: the output lacks %q", step.name, step.want)
		}
	}

	stopLocal(t, local, state)
}
