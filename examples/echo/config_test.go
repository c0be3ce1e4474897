package echo_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	apisv1alpha2 "github.com/kcp-dev/sdk/apis/apis/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/openmcp-project/kcp-serviceprovider/command"
	"github.com/openmcp-project/kcp-serviceprovider/examples/echo"
)

// config/kcp/apiexport.yaml is for review: it must be what run provisions, which is
// what kcp-manifests prints.
func TestKCPManifestsUpToDate(t *testing.T) {
	var want, errOut bytes.Buffer
	if code := command.Execute("kcp-serviceprovider", []string{"kcp-manifests"}, &want, &errOut, command.Commands(echo.Description())...); code != 0 {
		t.Fatalf("kcp-manifests exited %d: %s", code, errOut.String())
	}
	have, err := os.ReadFile(filepath.Join("config", "kcp", "apiexport.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want.Bytes()) {
		t.Error("examples/echo/config/kcp/apiexport.yaml is stale: run `make generate`")
	}
}

// The sample APIBinding must accept exactly the claims the runtime puts into the export:
// a claim it lacks is never accepted automatically, one it has in excess is trust the
// tenant gives for nothing.
func TestSampleBindingAcceptsExactlyTheRequiredClaims(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("config", "kcp", "apibinding.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	binding := &apisv1alpha2.APIBinding{}
	if err := yaml.UnmarshalStrict(raw, binding); err != nil {
		t.Fatal(err)
	}
	// local and the samples put the provider workspace at root:providers:<name>.
	providerWorkspace := "root:providers:" + echo.DefaultName
	if ref := binding.Spec.Reference.Export; ref == nil || ref.Name != echo.ExportName || ref.Path != providerWorkspace {
		t.Errorf("binding references %+v, want %s in %s", ref, echo.ExportName, providerWorkspace)
	}
	got := map[string][]string{}
	for _, c := range binding.Spec.PermissionClaims {
		if c.State != apisv1alpha2.ClaimAccepted {
			t.Errorf("claim %s/%s is %s", c.Group, c.Resource, c.State)
		}
		if c.Selector.MatchLabels["services.open-control-plane.io/managed-by"] != echo.DefaultName {
			t.Errorf("claim %s/%s is not narrowed to the runtime's objects: %+v", c.Group, c.Resource, c.Selector)
		}
		got[c.Group+"/"+c.Resource] = c.Verbs
	}
	// apiexport.yaml is what run provisions (TestKCPManifestsUpToDate).
	exported, err := os.ReadFile(filepath.Join("config", "kcp", "apiexport.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	export := &apisv1alpha2.APIExport{}
	docs := bytes.Split(exported, []byte("\n---\n"))
	if err := yaml.Unmarshal(docs[len(docs)-1], export); err != nil || export.Kind != "APIExport" {
		t.Fatalf("the last document of apiexport.yaml is no APIExport: %v", err)
	}
	want := map[string][]string{}
	for _, c := range export.Spec.PermissionClaims {
		want[c.Group+"/"+c.Resource] = c.Verbs
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sample binding accepts %v, the runtime claims %v", got, want)
	}
}
