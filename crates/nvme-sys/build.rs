//! Generates the bindings at build time from the system headers (libnvme-dev and
//! linux-libc-dev; scripts/install-deps.sh installs them) and links libnvme.

use std::env;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for header in ["wrapper_libnvme.h", "wrapper_ioctl.h"] {
        println!("cargo:rerun-if-changed={header}");
    }
    // libnvme: the identify command and the data structures it returns. libnvme's
    // passthrough structs clash with the kernel's, so the two headers get separate runs.
    bindgen::Builder::default()
        .header("wrapper_libnvme.h")
        .allowlist_function("nvme_identify")
        .allowlist_function("nvme_get_nsid")
        .allowlist_type("nvme_identify_args")
        .allowlist_type("nvme_id_ctrl")
        .allowlist_type("nvme_id_ns")
        .allowlist_type("nvme_zns_id_ns")
        .allowlist_type("nvme_zns_id_ctrl")
        .allowlist_type("nvme_zns_desc")
        .allowlist_type("nvme_zone_report")
        .allowlist_type("nvme_identify_cns")
        .allowlist_type("nvme_csi")
        .allowlist_type("nvme_zns_send_action")
        .allowlist_type("nvme_zns_recv_action")
        .allowlist_type("nvme_io_opcode")
        .allowlist_type("nvme_zns_status")
        .rustified_enum("nvme_identify_cns|nvme_csi")
        .derive_default(true)
        .layout_tests(true)
        .generate()
        .expect("bindgen over libnvme.h (is libnvme-dev installed? run scripts/install-deps.sh)")
        .write_to_file(out.join("libnvme.rs"))
        .expect("write libnvme bindings");
    bindgen::Builder::default()
        .header("wrapper_ioctl.h")
        .allowlist_type("nvme_uring_cmd")
        .derive_default(true)
        .layout_tests(true)
        .generate()
        .expect("bindgen over linux/nvme_ioctl.h (is linux-libc-dev installed?)")
        .write_to_file(out.join("nvme_ioctl.rs"))
        .expect("write ioctl bindings");
    println!("cargo:rustc-link-lib=nvme");
}
