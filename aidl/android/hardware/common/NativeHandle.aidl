// The AIDL form of a native_handle_t: its fds, then its ints.
// Frozen API: android.hardware.common, version 2.

package android.hardware.common;

@VintfStability
parcelable NativeHandle {
    ParcelFileDescriptor[] fds;
    int[] ints;
}
