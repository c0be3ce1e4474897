package widget

import (
	"embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crd/*.yaml
var crdFS embed.FS

// CRDs returns the generated CRDs: Widget (onboarding cluster, kcp schema) and
// WidgetConfig (platform cluster).
func CRDs() (widget, config *apiextensionsv1.CustomResourceDefinition, err error) {
	read := func(name string) (*apiextensionsv1.CustomResourceDefinition, error) {
		raw, err := crdFS.ReadFile("crd/" + name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return crd, nil
	}
	if widget, err = read("widgets.services.open-control-plane.io_widgets.yaml"); err != nil {
		return nil, nil, err
	}
	config, err = read("widgets.services.open-control-plane.io_widgetconfigs.yaml")
	return widget, config, err
}
