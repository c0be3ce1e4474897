package app

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
)

const repoRoot = "../../.."

// config/kcp/echo-apiexport.yaml is for review: it must be what run provisions.
func TestKCPManifestsUpToDate(t *testing.T) {
	want, err := kcpManifests()
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(repoRoot, "config", "kcp", "echo-apiexport.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Error("config/kcp/echo-apiexport.yaml is stale: run `make generate`")
	}
}

// config/rbac/onboarding.yaml documents, for --onboarding-kubeconfig deployments, the
// rules init and run otherwise request from the platform; they must not drift apart.
func TestOnboardingRBACMatchesRequests(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "rbac", "onboarding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string][]rbacv1.PolicyRule{}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		cr := &rbacv1.ClusterRole{}
		if err := yaml.UnmarshalStrict([]byte(doc), cr); err != nil {
			t.Fatal(err)
		}
		roles[cr.Name] = cr.Rules
	}
	for name, requested := range map[string][]rbacv1.PolicyRule{
		"echo-provider-onboarding-init": onboardingInitPermissions()[0].Rules,
		"echo-provider-onboarding-run":  onboardingRunPermissions()[0].Rules,
	} {
		if !reflect.DeepEqual(roles[name], requested) {
			t.Errorf("ClusterRole %s in config/rbac/onboarding.yaml:\n%+v\nrequested by the binary:\n%+v", name, roles[name], requested)
		}
	}
}

// --help is the binary's reference: every command documents its flags and the
// environment, and exits 0.
func TestHelp(t *testing.T) {
	cmds := []*Command{InitCommand(), RunCommand(), LocalCommand(), KCPManifestsCommand()}
	var out, errOut bytes.Buffer
	if code := Main("kcp-serviceprovider", []string{"--help"}, &out, &errOut, cmds...); code != 0 {
		t.Fatalf("--help exited %d: %s", code, errOut.String())
	}
	for _, c := range cmds {
		if !strings.Contains(out.String(), c.Name) {
			t.Errorf("command list lacks %s", c.Name)
		}
	}
	for cmd, flags := range map[string][]string{
		"init": {"--environment", "--provider-name", "--verbosity", "--platform-kubeconfig", "--onboarding-kubeconfig", "--namespace"},
		"run": {"--environment", "--provider-name", "--verbosity", "--leader-elect", "--metrics-bind-address", "--metrics-secure",
			"--health-probe-bind-address", "--platform-kubeconfig", "--onboarding-kubeconfig", "--standard-mode"},
		"local": {"--state-dir", "--repo-root"},
	} {
		out.Reset()
		if code := Main("kcp-serviceprovider", []string{cmd, "--help"}, &out, &errOut, cmds...); code != 0 {
			t.Fatalf("%s --help exited %d", cmd, code)
		}
		for _, f := range flags {
			if !strings.Contains(out.String(), "  -"+strings.TrimPrefix(f, "--")) {
				t.Errorf("%s --help lacks %s:\n%s", cmd, f, out.String())
			}
		}
		if !strings.Contains(out.String(), "POD_NAMESPACE") {
			t.Errorf("%s --help does not document the environment", cmd)
		}
	}
	if code := Main("kcp-serviceprovider", []string{"nope"}, &out, &errOut, cmds...); code != 2 {
		t.Errorf("unknown command exited %d, want 2", code)
	}
	if code := Main("kcp-serviceprovider", []string{"run", "--no-such-flag"}, &out, &errOut, cmds...); code != 2 {
		t.Errorf("unknown flag exited %d, want 2", code)
	}
}

// The sample APIBinding must accept exactly the claims the runtime puts into the export:
// a claim it lacks is never accepted automatically, one it has in excess is trust the
// tenant gives for nothing.
func TestSampleBindingAcceptsExactlyTheRequiredClaims(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "config", "kcp", "echo-apibinding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	binding := &apisv1alpha2.APIBinding{}
	if err := yaml.UnmarshalStrict(raw, binding); err != nil {
		t.Fatal(err)
	}
	if ref := binding.Spec.Reference.Export; ref == nil || ref.Name != exportName || ref.Path != localProviderWorkspace {
		t.Errorf("binding references %+v, want %s in %s", ref, exportName, localProviderWorkspace)
	}
	got := map[string][]string{}
	for _, c := range binding.Spec.PermissionClaims {
		if c.State != apisv1alpha2.ClaimAccepted {
			t.Errorf("claim %s/%s is %s", c.Group, c.Resource, c.State)
		}
		if c.Selector.MatchLabels["services.open-control-plane.io/managed-by"] != DefaultProviderName {
			t.Errorf("claim %s/%s is not narrowed to the runtime's objects: %+v", c.Group, c.Resource, c.Selector)
		}
		got[c.Group+"/"+c.Resource] = c.Verbs
	}
	want := map[string][]string{}
	for _, c := range apiexport.RequiredPermissionClaims() {
		want[c.Group+"/"+c.Resource] = c.Verbs
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sample binding accepts %v, the runtime claims %v", got, want)
	}
}

// local empties its state folder at start, but never a folder it did not write.
func TestResetStateDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetStateDir(dir); err == nil {
		t.Fatal("a foreign non-empty folder was accepted")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatalf("a foreign file was touched: %v", err)
	}

	state := filepath.Join(t.TempDir(), "state")
	if err := resetStateDir(state); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(state, "kcp", "root"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := resetStateDir(state); err != nil {
		t.Fatalf("emptying its own folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "kcp")); !os.IsNotExist(err) {
		t.Errorf("old state survived: %v", err)
	}
}

// Two local platforms must not share a state folder: the second would delete the
// first one's servers' data from under it.
func TestResetStateDirInUse(t *testing.T) {
	state := t.TempDir()
	// A process that surely runs: this test's parent.
	if err := os.WriteFile(filepath.Join(state, stateMarker), []byte(strconv.Itoa(os.Getppid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := resetStateDir(state); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("resetStateDir = %v, want in use", err)
	}
}
