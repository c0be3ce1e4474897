package ownresources

import (
	_ "embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed crd/ownresources.test.open-control-plane.io_gizmos.yaml
var crdYAML []byte

// CRD is the CRD `make generate` made of Gizmo.
func CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	return crd, yaml.Unmarshal(crdYAML, crd)
}
