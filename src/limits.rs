//! Resource limits of the service (`docs/limits.md`): how many connections it serves at once,
//! how large a model or an execution may be, and how much memory prepared models may hold in
//! total and per client. Each limit is checked from the sizes a call declares, before the
//! service allocates anything for it, and a call past a limit is refused with
//! GENERAL_FAILURE (bad-input class BI-61 in `docs/bad-inputs.md`): the model is not
//! malformed, the device just will not take that much on.

use nnhal_hal::{HalError, HalResult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// The limits one service enforces. [`Limits::default`] suits a 2-core phone with a few GB of
/// memory: the float32 MobileNet (about 17 MB of constants) prepares and runs with room to
/// spare, and no single client can take more than half of what all of them may.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; more wait in the listen backlog (host RPC server only).
    pub max_connections: usize,
    /// A model's constant data: `operandValues` plus the declared sizes of its pools.
    pub max_model_bytes: u64,
    /// Operands plus operations of one model.
    pub max_operands: usize,
    /// Estimated memory of all prepared models alive at once.
    pub max_prepared_bytes: u64,
    /// Estimated memory of the prepared models one client process holds.
    pub max_prepared_bytes_per_client: u64,
    /// Bytes the arguments of one execution name (inputs and outputs together).
    pub max_execution_bytes: u64,
    /// How long an accepted connection may take to complete its handshake before it is
    /// dropped (host RPC server only): an idle connection must not hold a slot.
    pub handshake_timeout: Duration,
    /// How long a connection that holds nothing (no call open, no object of the service's
    /// but the device, no callback of its own registered) may stay silent before the
    /// service closes it; `None`: never (host RPC server only). At the connection limit, the
    /// one silent longest is closed after [`EVICT_WHEN_FULL_AFTER`] to serve a waiting client.
    pub idle_timeout: Option<Duration>,
    /// How long the service waits for a client to take a reply (or anything else the service
    /// sends it) before it ends that client's session (host RPC server only).
    pub send_timeout: Duration,
    /// The longest a fenced execution waits for its fences when the caller gave neither a
    /// deadline nor a duration.
    pub max_fence_wait: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 64,
            max_model_bytes: 256 * MIB,
            max_operands: 100_000,
            max_prepared_bytes: 1024 * MIB,
            max_prepared_bytes_per_client: 512 * MIB,
            max_execution_bytes: 256 * MIB,
            handshake_timeout: Duration::from_secs(2),
            idle_timeout: Some(Duration::from_secs(60)),
            send_timeout: Duration::from_secs(10),
            max_fence_wait: Duration::from_secs(60),
        }
    }
}

/// At the connection limit, a connection that holds nothing and has been silent this long
/// (or [`Limits::idle_timeout`], when shorter) is closed so that a waiting client is served.
pub const EVICT_WHEN_FULL_AFTER: Duration = Duration::from_secs(1);

impl Limits {
    /// How long a connection that holds nothing must have been silent before it is closed
    /// for a client waiting at the connection limit.
    pub fn evict_when_full_after(&self) -> Duration {
        self.idle_timeout.map_or(EVICT_WHEN_FULL_AFTER, |idle| {
            idle.min(EVICT_WHEN_FULL_AFTER)
        })
    }

    /// Refuses a model whose declared sizes exceed [`Limits::max_model_bytes`] or
    /// [`Limits::max_operands`].
    pub fn check_model(&self, constant_bytes: u64, operands: usize) -> HalResult<()> {
        if operands > self.max_operands {
            return Err(HalError::GeneralFailure(format!(
                "the model has {operands} operands and operations; this service takes at most \
                 {} (--max-operands)",
                self.max_operands
            )));
        }
        if constant_bytes > self.max_model_bytes {
            return Err(HalError::GeneralFailure(format!(
                "the model declares {constant_bytes} bytes of constants; this service takes at \
                 most {} (--max-model-bytes)",
                self.max_model_bytes
            )));
        }
        Ok(())
    }

    /// Refuses an execution whose arguments name more than [`Limits::max_execution_bytes`].
    pub fn check_execution(&self, argument_bytes: u64) -> HalResult<()> {
        if argument_bytes > self.max_execution_bytes {
            return Err(HalError::GeneralFailure(format!(
                "the request's arguments span {argument_bytes} bytes; this service takes at \
                 most {} per execution (--max-execution-bytes)",
                self.max_execution_bytes
            )));
        }
        Ok(())
    }
}

/// The prepared-model memory in use, in total and per client process.
#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    used: Mutex<Used>,
}

#[derive(Debug, Default)]
struct Used {
    total: u64,
    per_client: HashMap<i32, u64>,
}

impl Budget {
    pub fn new(limits: Limits) -> Arc<Budget> {
        Arc::new(Budget {
            limits,
            used: Mutex::default(),
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Reserves `bytes` for a model `client` prepares; the reservation lasts as long as the
    /// returned [`Charge`]. Refused when either the client's share or the total would pass its
    /// limit.
    pub fn charge(self: &Arc<Self>, client: i32, bytes: u64) -> HalResult<Charge> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let mine = used.per_client.get(&client).copied().unwrap_or(0);
        if mine.saturating_add(bytes) > self.limits.max_prepared_bytes_per_client {
            return Err(HalError::GeneralFailure(format!(
                "preparing this model needs about {bytes} bytes; this client already holds \
                 {mine} of the {} one client may (--max-prepared-bytes-per-client)",
                self.limits.max_prepared_bytes_per_client
            )));
        }
        if used.total.saturating_add(bytes) > self.limits.max_prepared_bytes {
            return Err(HalError::GeneralFailure(format!(
                "preparing this model needs about {bytes} bytes; prepared models already hold \
                 {} of the {} the service allows (--max-prepared-bytes)",
                used.total, self.limits.max_prepared_bytes
            )));
        }
        used.total += bytes;
        *used.per_client.entry(client).or_default() += bytes;
        Ok(Charge {
            budget: Arc::clone(self),
            client,
            bytes,
        })
    }

    /// Bytes reserved now, in total.
    pub fn used(&self) -> u64 {
        self.used.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

/// A reservation of prepared-model memory; released when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<Budget>,
    client: i32,
    bytes: u64,
}

impl Charge {
    /// The limits of the service that granted this charge.
    pub fn limits(&self) -> &Limits {
        &self.budget.limits
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        {
            let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
            used.total = used.total.saturating_sub(self.bytes);
            if let Some(mine) = used.per_client.get_mut(&self.client) {
                *mine = mine.saturating_sub(self.bytes);
                if *mine == 0 {
                    used.per_client.remove(&self.client);
                }
            }
        }
        release_free_memory();
    }
}

/// Hands memory the allocator keeps after a large free back to the system. glibc keeps freed
/// heap memory for reuse; after a released model of tens of MB the service would otherwise
/// stay at its high-water mark.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes the arena locks
    // itself and has no preconditions.
    unsafe {
        nix::libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_bounded_per_client_and_in_total_and_released_on_drop() {
        let budget = Budget::new(Limits {
            max_prepared_bytes: 100,
            max_prepared_bytes_per_client: 60,
            ..Limits::default()
        });
        let a = budget.charge(1, 50).unwrap();
        assert!(budget.charge(1, 20).is_err(), "client 1 past its share");
        let b = budget.charge(2, 50).unwrap();
        assert!(budget.charge(3, 10).is_err(), "past the total");
        assert_eq!(budget.used(), 100);
        drop(a);
        assert_eq!(budget.used(), 50);
        let _c = budget.charge(1, 40).unwrap();
        drop(b);
        assert_eq!(budget.used(), 40);
    }

    #[test]
    fn model_and_execution_checks() {
        let limits = Limits {
            max_model_bytes: 10,
            max_operands: 3,
            max_execution_bytes: 5,
            ..Limits::default()
        };
        assert!(limits.check_model(10, 3).is_ok());
        assert!(limits.check_model(11, 3).is_err());
        assert!(limits.check_model(10, 4).is_err());
        assert!(limits.check_execution(5).is_ok());
        assert!(limits.check_execution(6).is_err());
    }
}
