package e2estandard

import (
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
