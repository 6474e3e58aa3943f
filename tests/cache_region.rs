//! The region a compilation-cache restore reads a model's packed constants into
//! (`nnhal_kernels::aligned::Region`, src/cache.rs `restore_packed`): the restored model holds
//! it, executes from it after the restore has returned, and frees it when dropped; the files
//! the preparation writes piece by piece are the ones the in-memory image describes. One
//! process of its own: it reads the process-wide count of region bytes.

use nnhal::cache::TOKEN_BYTES;
use nnhal::kernels::aligned::{region_bytes, HUGE};
use nnhal_vts::caching::{self, CacheFiles};
use nnhal_vts::transport::InProcessDevice;
use nnhal_vts::vector::{bundled_dir, load, Vector};
use nnhal_vts::{to_model, ConstantMode};

fn vectors() -> Vec<Vector> {
    load(&bundled_dir()).expect("bundled vectors load")
}

#[test]
fn a_restored_model_holds_its_region_until_dropped() {
    let v = vectors();
    let driver = nnhal::Driver::new(1).unwrap();
    let token = [5u8; TOKEN_BYTES];
    let mut restored_any = 0;
    for name in ["conv_float_large", "conv_quant8_large", "depthwise_conv"] {
        let Some(vector) = v.iter().find(|v| v.name == name) else {
            continue;
        };
        let model = to_model(vector, ConstantMode::Copy).unwrap();
        let files = CacheFiles::new().unwrap();
        // The streamed files hold exactly the image the driver describes in memory.
        let fresh = driver
            .prepare_model_to_files(model.clone(), &files.model_fds(), &files.data_fds(), &token)
            .unwrap();
        let (_, image) = driver.prepare_model_for_cache(model, &token).unwrap();
        let image = image.expect("a model without subgraphs is cached");
        let data = CacheFiles::read(&files.data);
        assert_eq!(CacheFiles::read(&files.model), image.model, "{name}");
        assert_eq!(data, image.data, "{name}");
        drop(fresh);
        // Preparing without a cache maps no region; a restore maps one sized from its data
        // file, held by the restored model alone.
        assert_eq!(region_bytes(), 0, "{name}");
        let restored = driver
            .prepare_model_from_files(&files.model_fds(), &files.data_fds(), &token)
            .unwrap();
        let held = region_bytes();
        assert!(
            held > 0 && held <= data.len() + HUGE,
            "{name}: {held} region bytes for a data file of {}",
            data.len()
        );
        drop(restored);
        assert_eq!(region_bytes(), 0, "{name}: the region outlived its model");
        restored_any += 1;
    }
    assert!(restored_any >= 2, "the bundled vectors changed");

    // Restored, executed (long after each restore returned) and compared with the goldens;
    // everything freed afterwards.
    let device = InProcessDevice::new(1).unwrap();
    let chosen: Vec<Vector> = v
        .iter()
        .filter(|v| v.name.starts_with("conv_") || v.name.starts_with("depthwise"))
        .cloned()
        .collect();
    assert!(chosen.len() >= 4);
    let failed: Vec<String> = caching::vectors(&device, &chosen)
        .into_iter()
        .filter_map(|(name, o)| o.err().map(|why| format!("{name}: {why}")))
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert_eq!(region_bytes(), 0);
}
