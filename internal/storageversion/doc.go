// Package storageversion moves the stored objects of a CRD to its storage version:
// once the API server writes in that version, every object is rewritten, and then the
// CRD's status.storedVersions is set to that version alone. Until then package
// apichange refuses to remove an older version, whose objects would be unreadable.
// [WaitDiscoverable] waits until discovery serves a CRD in every served version, which
// clients need before they can find its kind.
//
// `init` runs it after it replaced a CRD (command/init.go). Design note:
// docs/design/api-upgrades.md.
package storageversion
