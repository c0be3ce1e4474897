package e2estandard

import (
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/testkit/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
