// A mappable file region: length bytes at offset, with PROT_* bits.
// Frozen API: android.hardware.common, version 2.

package android.hardware.common;

@VintfStability
parcelable MappableFile {
    long length;
    int prot;
    ParcelFileDescriptor fd;
    long offset;
}
