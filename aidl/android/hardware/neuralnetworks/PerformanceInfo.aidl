// Time and power relative to the CPU path; lower is better, must be > 0.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
parcelable PerformanceInfo {
    float execTime;
    float powerUsage;
}
