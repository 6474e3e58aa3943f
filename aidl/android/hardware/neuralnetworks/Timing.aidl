// Durations in nanoseconds; -1 when not measured.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable Timing {
    long timeOnDeviceNs;
    long timeInDriverNs;
}
