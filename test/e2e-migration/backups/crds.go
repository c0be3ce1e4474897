package backups

import "embed"

// CRDs are the Backup (onboarding cluster) and BackupConfig (platform cluster) CRDs,
// each labelled with the cluster it belongs on.
//
//go:embed crd/*.yaml
var CRDs embed.FS
