package e2ebinary

import (
	"testing"

	"github.com/openmcp-project/kcp-serviceprovider/internal/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
