// A shared-memory region: the fd and its size in bytes.
// Frozen API: android.hardware.common, version 2.

package android.hardware.common;

@VintfStability
parcelable Ashmem {
    ParcelFileDescriptor fd;
    long size;
}
