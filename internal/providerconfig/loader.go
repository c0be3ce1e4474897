package providerconfig

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/provider"
)

// DefaultPollInterval is used when the ProviderConfig sets none.
const DefaultPollInterval = time.Minute

// ErrMissing says the ProviderConfig does not exist.
var ErrMissing = errors.New("ProviderConfig missing")

// InvalidError says the ProviderConfig exists but cannot be used.
type InvalidError struct{ Err error }

func (e *InvalidError) Error() string { return "ProviderConfig invalid: " + e.Err.Error() }
func (e *InvalidError) Unwrap() error { return e.Err }

// Loader reads one named ProviderConfig.
type Loader struct {
	// Reader is the platform cluster's cached client.
	Reader client.Reader
	// Name is the ProviderConfig's name: the provider's name.
	Name string
	// New returns an empty ProviderConfig of the provider's type.
	New func() provider.ProviderConfig
}

// Load returns the validated ProviderConfig, ErrMissing, or an *InvalidError.
func (l *Loader) Load(ctx context.Context) (provider.ProviderConfig, error) {
	pc := l.New()
	if err := l.Reader.Get(ctx, client.ObjectKey{Name: l.Name}, pc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: no %T named %q on the platform cluster", ErrMissing, pc, l.Name)
		}
		return nil, fmt.Errorf("reading ProviderConfig %q: %w", l.Name, err)
	}
	if v, ok := pc.(provider.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, &InvalidError{Err: err}
		}
	}
	return pc, nil
}

// PollInterval of pc, or the default.
func PollInterval(pc provider.ProviderConfig) time.Duration {
	if p, ok := pc.(provider.PollIntervaler); ok {
		if d := p.PollInterval(); d > 0 {
			return d
		}
	}
	return DefaultPollInterval
}
