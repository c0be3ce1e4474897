package backups

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ConfigMapName is the tenant's backup schedule on the workload cluster.
const ConfigMapName = "backup-schedule"

// Install is what both binaries do for a Backup: its schedule in a ConfigMap in the
// tenant's namespace on the workload cluster, reported in status.resources.
func Install(ctx context.Context, wl client.Client, ns string, b *Backup, bucket string) error {
	if err := wl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName}}
	if _, err := controllerutil.CreateOrUpdate(ctx, wl, cm, func() error {
		cm.Data = map[string]string{"schedule": b.Spec.Schedule, "bucket": bucket}
		return nil
	}); err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", ns, ConfigMapName, err)
	}
	b.Status.Resources = []ManagedObject{{Kind: "ConfigMap", Name: ConfigMapName, Namespace: ns, Phase: "Ready", Message: "schedule " + b.Spec.Schedule}}
	return nil
}

// Uninstall removes the ConfigMap Install wrote. The namespace stays: the local
// platform's API servers run no namespace controller to finish its deletion.
func Uninstall(ctx context.Context, wl client.Client, ns string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ConfigMapName}}
	if err := wl.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ConfigMap %s/%s: %w", ns, ConfigMapName, err)
	}
	return nil
}
