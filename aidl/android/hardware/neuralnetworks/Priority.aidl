// Relative priority of a prepared model among one client's models.
// Frozen API: android.hardware.neuralnetworks, version 1.

package android.hardware.neuralnetworks;

@VintfStability
@Backing(type="int")
enum Priority {
    LOW = 0,
    MEDIUM = 1,
    HIGH = 2,
}
