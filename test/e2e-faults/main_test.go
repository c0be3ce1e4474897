package e2efaults

import (
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
