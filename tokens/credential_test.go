package tokens_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/openmcp-project/kcp-serviceprovider/tokens"
)

func TestCredentialRedactsSecrets(t *testing.T) {
	const token = "s3cr3t-t0ken"
	cred := &tokens.Credential{
		Cluster:    "abc",
		Token:      token,
		Kubeconfig: []byte("users:\n- user:\n    token: " + token),
		ExpiresAt:  time.Unix(3600, 0),
		RenewAt:    time.Unix(2880, 0),
	}
	var logged bytes.Buffer
	log := funcr.NewJSON(func(obj string) { logged.WriteString(obj) }, funcr.Options{})
	log.Info("minted", "credential", cred, "value", *cred)

	for _, out := range []string{
		fmt.Sprintf("%v", cred), fmt.Sprintf("%+v", cred), fmt.Sprintf("%#v", cred), cred.String(),
		fmt.Sprintf("%v", *cred), fmt.Sprintf("%+v", *cred), fmt.Sprintf("%#v", *cred),
		fmt.Sprint([]*tokens.Credential{cred}), logged.String(),
	} {
		if strings.Contains(out, token) {
			t.Errorf("output reveals the token: %s", out)
		}
		if !strings.Contains(out, "redacted") {
			t.Errorf("output does not say it redacted: %s", out)
		}
	}
}
