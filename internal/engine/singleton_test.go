package engine

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openmcp-project/kcp-serviceprovider/test/widget"
)

// TestOldest: the singleton rule serves the oldest object, and between objects created
// in the same second the first by namespace/name, whatever order the cache lists them in.
func TestOldest(t *testing.T) {
	at := func(ns, name string, sec int) client.Object {
		return &widget.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(sec), 0))}}
	}
	if got := Oldest(nil); got != nil {
		t.Errorf("Oldest(nil) = %v", got)
	}
	objs := []client.Object{at("b", "x", 2), at("a", "z", 1), at("a", "y", 1), at("", "w", 3)}
	got := Oldest(objs)
	if key := client.ObjectKeyFromObject(got).String(); key != "a/y" {
		t.Errorf("Oldest = %s, want a/y", key)
	}
	if client.ObjectKeyFromObject(objs[0]).String() != "b/x" {
		t.Error("Oldest reordered its argument")
	}
}
