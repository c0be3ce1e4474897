package command

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/apiexport"
)

const repoRoot = ".."

// echoProvider is the reference provider's description as far as these tests need it,
// read from its generated CRD files (the command package never imports examples/).
func echoProvider() Provider {
	return Provider{
		Name: "echo",
		CRDs: os.DirFS(filepath.Join(repoRoot, "examples", "echo", "config", "crd")),
		NewRuntime: func(string, apiexport.Provisionable) (Runner, error) {
			return nil, errors.New("not in these tests")
		},
		Local: &Local{},
	}
}

// The description is derived from the CRDs: the Service API is the onboarding
// cluster's, its storage version is the kind init registers, its group the default
// export name.
func TestDescribeDerivesFromTheCRDs(t *testing.T) {
	d, err := echoProvider().describe()
	if err != nil {
		t.Fatal(err)
	}
	if len(d.crds) != 2 {
		t.Errorf("%d CRDs, want Echo and ProviderConfig", len(d.crds))
	}
	want := schema.GroupVersionKind{Group: "echo.services.open-control-plane.io", Version: "v1alpha1", Kind: "Echo"}
	if d.serviceGVK != want || d.serviceResource.Resource != "echoes" || d.exportName != want.Group {
		t.Errorf("described %v %v export %q", d.serviceGVK, d.serviceResource, d.exportName)
	}
	for _, p := range []Provider{{}, {Name: "x"}, {Name: "x", CRDs: fstest.MapFS{}, NewRuntime: echoProvider().NewRuntime}} {
		if _, err := p.describe(); err == nil {
			t.Errorf("%+v was accepted", p)
		}
	}
}

// config/rbac/onboarding.yaml documents, for --onboarding-kubeconfig deployments, the
// rules init and run otherwise request from the platform; they must not drift apart.
func TestOnboardingRBACMatchesRequests(t *testing.T) {
	d, err := echoProvider().describe()
	if err != nil {
		t.Fatal(err)
	}
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
		"echo-provider-onboarding-init": d.onboardingInitPermissions()[0].Rules,
		"echo-provider-onboarding-run":  d.onboardingRunPermissions()[0].Rules,
	} {
		if !reflect.DeepEqual(roles[name], requested) {
			t.Errorf("ClusterRole %s in config/rbac/onboarding.yaml:\n%+v\nrequested by the binary:\n%+v", name, roles[name], requested)
		}
	}
}

// --help is the binary's reference: every command documents its flags and the
// environment, and exits 0.
func TestHelp(t *testing.T) {
	cmds := Commands(echoProvider())
	var out, errOut bytes.Buffer
	if code := Execute("kcp-serviceprovider", []string{"--help"}, &out, &errOut, cmds...); code != 0 {
		t.Fatalf("--help exited %d: %s", code, errOut.String())
	}
	for _, c := range cmds {
		if !strings.Contains(out.String(), c.Name) {
			t.Errorf("command list lacks %s", c.Name)
		}
	}
	for cmd, flags := range map[string][]string{
		"init": {"--environment", "--provider-name", "--verbosity", "--platform-kubeconfig", "--onboarding-kubeconfig", "--namespace"},
		"run": {"--environment", "--provider-name", "--verbosity", "--leader-elect", "--metrics-bind-address", "--metrics-secure", "--metrics-cert-dir",
			"--health-probe-bind-address", "--platform-kubeconfig", "--onboarding-kubeconfig", "--standard-mode"},
	} {
		out.Reset()
		if code := Execute("kcp-serviceprovider", []string{cmd, "--help"}, &out, &errOut, cmds...); code != 0 {
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
	if code := Execute("kcp-serviceprovider", []string{"nope"}, &out, &errOut, cmds...); code != 2 {
		t.Errorf("unknown command exited %d, want 2", code)
	}
	if code := Execute("kcp-serviceprovider", []string{"run", "--no-such-flag"}, &out, &errOut, cmds...); code != 2 {
		t.Errorf("unknown flag exited %d, want 2", code)
	}
}
