package localenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PollInterval is how often Poll asks.
const PollInterval = 200 * time.Millisecond

// Poll calls cond every PollInterval until it returns nil, or timeout (or ctx) runs
// out; the error then names what was waited for and carries cond's last error, which
// says why not. A call of cond cut short by the poll's own end (its requests fail
// with "client rate limiter Wait ... context deadline exceeded") says nothing of the
// object: the answer before it is kept.
func Poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, PollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		err := cond(ctx)
		if err != nil && ctx.Err() != nil && last != nil {
			return false, nil
		}
		last = err
		return last == nil, nil
	})
	if err != nil {
		if last == nil {
			last = err
		}
		return fmt.Errorf("%s: not reached within %s: %w", what, timeout, last)
	}
	return nil
}

// ReadObjects decodes every object of a multi-document YAML (or JSON) file.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// ApplyFile creates every object of a multi-document YAML file, after mutate if
// given. Objects that exist are left alone.
func ApplyFile(ctx context.Context, c client.Client, path string, mutate func(*unstructured.Unstructured)) error {
	objs, err := ReadObjects(path)
	if err != nil {
		return err
	}
	for _, u := range objs {
		if mutate != nil {
			mutate(u)
		}
		if err := c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: creating %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// DeleteAndWait deletes obj and waits up to timeout until it is gone (its finalizers
// done).
func DeleteAndWait(ctx context.Context, c client.Client, obj client.Object, timeout time.Duration) error {
	key := client.ObjectKeyFromObject(obj)
	if err := c.Delete(ctx, obj); err != nil {
		return fmt.Errorf("deleting %s: %w", key, err)
	}
	return Poll(ctx, timeout, key.String()+" deleted", func(ctx context.Context) error {
		return Gone(c.Get(ctx, key, obj))
	})
}

// Gone turns the error of a Get into a poll condition that holds once the object is
// gone: nil for NotFound, an error while it is still there or cannot be read.
func Gone(getErr error) error {
	switch {
	case apierrors.IsNotFound(getErr):
		return nil
	case getErr == nil:
		return errors.New("still there")
	default:
		return fmt.Errorf("still there? %w", getErr)
	}
}
