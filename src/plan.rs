//! The compiled plan: what prepareModel turns a validated model into (docs/design.md §3, §8).
//!
//! Compiling chooses, once, the registration of every operation (`executor::lookup`), packs
//! its constant operands into the layout the chosen micro-kernel reads, and — when every shape
//! and parameter is known before execution — places every non-constant operand in one arena
//! planned from the operands' lifetimes: two operands share bytes only when no step needs both.
//! A RESHAPE whose input lives in the arena is not a step at all: its output aliases its input.
//!
//! Each execution takes an arena from a small lock-free pool kept by the plan (allocating one
//! only when every pooled arena is in use), so any number of executions may run on one prepared
//! model at once and the steady state allocates nothing. Models whose shapes or parameters are
//! only known at execution (unspecified dimensions, runtime scalar parameters, omittable
//! inputs) run the same registrations on buffers allocated per execution instead, inferring
//! shapes as they go; so does a model whose arena would exceed the execution memory budget,
//! which then fails at execution as before.

use crate::executor::{self, Call, OpImpl, PackArgs, Packed, WorkArgs};
use crate::tensor::{
    read_f16, read_halves, read_words, round_to_f16, write_f16, write_halves, write_words, Data,
    DataMut, DataRef, Tensor, TensorMut, TensorRef,
};
use crossbeam_queue::ArrayQueue;
use nnhal_hal::memory::MappedPool;
use nnhal_hal::shape::{self, Arg, InferError, Inferred, Params};
use nnhal_hal::validate::{self, readers_all, BoundRequest, ValidModel};
use nnhal_hal::{HalError, HalResult, OperandLifeTime, OperandType};
use nnhal_kernels::aligned::AlignedBuf;
use nnhal_kernels::ukernels::Ukernels;
use smallvec::SmallVec;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Upper bound on the bytes of operand values one execution may hold at once. A model or
/// request that needs more fails with GENERAL_FAILURE instead of exhausting the service.
pub const EXECUTION_MEMORY_BUDGET: u64 = 4 << 30;

/// Plans whose estimated work (about one unit per multiply-add or element visited) is at most
/// this run on the thread that asked for the execution. Handing an execution to the kernel
/// pool means waking a worker and sleeping until it is done, some 10–25 µs; below this size
/// the whole plan takes about that long on one core, so the pool cannot win the hand-off back.
pub const INLINE_MAX_WORK: u64 = 1 << 15;

/// How long a WHILE loop may run when the client gives no `loopTimeoutDurationNs` (-1): the
/// interface's `DEFAULT_LOOP_TIMEOUT_DURATION_NS`, 2 s.
pub const DEFAULT_LOOP_TIMEOUT: Duration = Duration::from_secs(2);

/// The longest loop timeout a client may ask for: the interface's
/// `MAXIMUM_LOOP_TIMEOUT_DURATION_NS`, 15 s.
pub const MAXIMUM_LOOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Arenas kept per prepared model: enough for the executions a client runs at once in
/// practice; more concurrent executions allocate (and free) their own.
const POOLED_ARENAS: usize = 4;

/// Element type of a value in an arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Elem {
    F32,
    I32,
    U8,
    I16,
}

impl Elem {
    fn of(ty: OperandType) -> HalResult<Elem> {
        Ok(match ty {
            OperandType::Float32 | OperandType::TensorFloat32 => Elem::F32,
            OperandType::Int32 | OperandType::UInt32 | OperandType::TensorInt32 => Elem::I32,
            // The 8-bit symmetric types (NNAPI 1.2) hold int8 values in the same bytes; TENSOR_BOOL8
            // one byte per element.
            OperandType::TensorQuant8Asymm
            | OperandType::TensorBool8
            | OperandType::TensorQuant8Symm
            | OperandType::TensorQuant8SymmPerChannel => Elem::U8,
            OperandType::TensorQuant16Symm | OperandType::TensorQuant16Asymm => Elem::I16,
            _ => {
                return Err(HalError::GeneralFailure(format!(
                    "{ty} operands cannot be executed"
                )))
            }
        })
    }

    fn size(self) -> usize {
        match self {
            Elem::F32 | Elem::I32 => 4,
            Elem::I16 => 2,
            Elem::U8 => 1,
        }
    }
}

/// A byte range of the arena holding one operand's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Region {
    offset: usize,
    bytes: usize,
    elem: Elem,
}

impl Region {
    fn end(&self) -> usize {
        self.offset + self.bytes
    }

    fn overlaps(&self, other: &Region) -> bool {
        self.offset < other.end() && other.offset < self.end()
    }
}

/// Where an operand's values are during an execution of a static plan.
#[derive(Clone, Debug)]
enum Home {
    /// No value (an omitted optional operand).
    Absent,
    Constant(Arc<Tensor>),
    Arena(Region),
}

/// IF and WHILE (NNAPI 1.3): the referenced subgraphs a control-flow step runs, by
/// `Model::referenced` index.
#[derive(Clone, Copy, Debug)]
enum Control {
    If { then: usize, otherwise: usize },
    While { condition: usize, body: usize },
}

/// What an execution hands down into the subgraphs it runs: their plans and how long WHILE
/// loops may still take.
#[derive(Clone, Copy)]
struct Exec<'a> {
    subgraphs: &'a [Plan],
    loop_timeout: Duration,
    /// The end of the outermost WHILE in progress: a loop nested in another shares its time.
    deadline: Option<Instant>,
}

impl<'a> Exec<'a> {
    fn subgraph(&self, s: usize) -> HalResult<&'a Plan> {
        self.subgraphs
            .get(s)
            .ok_or_else(|| HalError::GeneralFailure(format!("referenced subgraph {s} has no plan")))
    }
}

/// What a compilation cache holds for one operation ([`crate::cache::decode_packed`]).
#[derive(Debug)]
pub enum StoredPack {
    /// Nothing was packed for it.
    Nothing,
    /// Packed again from the model's constants.
    Rebuild,
    /// The packed constants, used instead of packing once they fit the operation
    /// ([`executor::packed_fits`]).
    Packed(Box<Packed>),
}

/// One operation of the plan.
struct Step {
    /// Index of the operation in the model.
    op: usize,
    /// The registration; `None` for IF and WHILE, which the plan runs itself (`control`).
    imp: Option<&'static OpImpl>,
    control: Option<Control>,
    /// Resolved at prepare when static; `None`: inferred at execution.
    params: Option<Inferred>,
    packed: Option<Packed>,
    /// A RESHAPE whose output aliases its input: nothing to do.
    aliased: bool,
    /// Output positions in increasing arena offset (static plans), for carving the arena.
    out_order: SmallVec<[usize; 4]>,
}

/// A stored packed entry that is not what operation `k` packs.
fn misfit(k: usize) -> HalError {
    HalError::GeneralFailure(format!(
        "compilation cache not usable: the packed entry of operation {k} does not fit it"
    ))
}

/// The arena layout of a fully static model.
struct Layout {
    homes: Vec<Home>,
    bytes: usize,
}

/// A compiled model.
pub struct Plan {
    model: ValidModel,
    steps: Vec<Step>,
    /// Decoded constant values, by operand index.
    constants: Vec<Option<Arc<Tensor>>>,
    /// `Some` for a fully static plan (arena execution), `None` for the dynamic path.
    layout: Option<Layout>,
    arenas: ArrayQueue<AlignedBuf<u8>>,
    /// Estimated work of a static plan (see [`INLINE_MAX_WORK`]).
    work: Option<u64>,
    kernels: &'static Ukernels,
    /// The plans of the referenced subgraphs (IF branches, WHILE conditions and bodies), by
    /// `Model::referenced` index: held by the main plan, shared by every nesting level.
    subgraphs: Vec<Plan>,
}

impl Plan {
    /// Compiles a validated, supported model: decodes constants, chooses and packs every
    /// operation's kernel, and plans the arena when everything is static, for executions on
    /// `threads` kernel threads.
    pub fn compile(
        model: ValidModel,
        constants: Vec<Option<Arc<Tensor>>>,
        kernels: &'static Ukernels,
        threads: usize,
    ) -> HalResult<Plan> {
        Plan::compile_restored(model, constants, kernels, threads, None)
    }

    /// Like [`Plan::compile`], taking each operation's packed constants from `stored` (one
    /// entry per operation, from a compilation cache) instead of packing them where it holds
    /// them. A stored entry that does not fit its operation is GENERAL_FAILURE (a cache
    /// miss).
    pub fn compile_restored(
        model: ValidModel,
        constants: Vec<Option<Arc<Tensor>>>,
        kernels: &'static Ukernels,
        threads: usize,
        stored: Option<Vec<StoredPack>>,
    ) -> HalResult<Plan> {
        let mut plan = Plan::compile_steps(model, constants, kernels, stored)?;
        plan.work = plan.estimated_work();
        plan.layout = plan.plan_arena(threads)?;
        plan.release_packed_constants();
        Ok(plan)
    }

    /// Compiles a referenced subgraph: its operations chosen and packed like the main
    /// model's, run on values handed over from the operation that names it (the dynamic
    /// path: a WHILE body's shapes may change from one iteration to the next).
    pub fn compile_subgraph(
        model: ValidModel,
        constants: Vec<Option<Arc<Tensor>>>,
        kernels: &'static Ukernels,
    ) -> HalResult<Plan> {
        Plan::compile_steps(model, constants, kernels, None)
    }

    /// The packed constants of each operation of the main graph, in model order (`None`:
    /// nothing packed), for the compilation cache.
    pub fn packed_steps(&self) -> impl Iterator<Item = Option<&Packed>> {
        self.steps.iter().map(|step| step.packed.as_ref())
    }

    /// By operand, the constants this plan dropped once every reader had packed them (see
    /// `release_packed_constants`): values only packed steps read.
    pub fn released_constants(&self) -> Vec<bool> {
        self.model
            .operands
            .iter()
            .zip(&self.constants)
            .map(|(o, c)| {
                c.is_none()
                    && self.layout.is_some()
                    && matches!(
                        o.lifetime,
                        OperandLifeTime::ConstantCopy | OperandLifeTime::ConstantReference
                    )
            })
            .collect()
    }

    /// The plans of the referenced subgraphs the IF and WHILE operations run (see
    /// [`Plan::compile_subgraph`]), by `Model::referenced` index.
    pub fn set_subgraphs(&mut self, subgraphs: Vec<Plan>) {
        self.subgraphs = subgraphs;
    }

    fn compile_steps(
        model: ValidModel,
        constants: Vec<Option<Arc<Tensor>>>,
        kernels: &'static Ukernels,
        stored: Option<Vec<StoredPack>>,
    ) -> HalResult<Plan> {
        let mut steps = Vec::with_capacity(model.operations.len());
        let mut stored = stored.map(Vec::into_iter);
        for (k, op) in model.operations.iter().enumerate() {
            let entry = match &mut stored {
                Some(entries) => entries.next().ok_or_else(|| {
                    HalError::GeneralFailure(format!(
                        "compilation cache not usable: no packed entry for operation {k}"
                    ))
                })?,
                None => StoredPack::Rebuild,
            };
            let subgraph = |pos: usize| model.operands[op.inputs[pos]].location.offset as usize;
            let control = match op.ty {
                nnhal_hal::OperationType::If => Some(Control::If {
                    then: subgraph(1),
                    otherwise: subgraph(2),
                }),
                nnhal_hal::OperationType::While => Some(Control::While {
                    condition: subgraph(0),
                    body: subgraph(1),
                }),
                _ => None,
            };
            if control.is_some() {
                steps.push(Step {
                    op: k,
                    imp: None,
                    control,
                    params: None,
                    packed: None,
                    aliased: false,
                    out_order: SmallVec::new(),
                });
                continue;
            }
            let ty = model.operands[op.inputs[0]].ty;
            let imp = executor::lookup(op.ty, ty).ok_or_else(|| {
                HalError::GeneralFailure(format!(
                    "operation {k} ({}) on {ty} cannot be executed by this driver",
                    op.ty
                ))
            })?;
            let params = model.static_params[k].clone().and_then(|params| {
                let outputs = op
                    .outputs
                    .iter()
                    .map(|&o| model.static_dims[o].clone())
                    .collect::<Option<_>>()?;
                Some(Inferred { outputs, params })
            });
            let packed = match (&params, entry) {
                (_, StoredPack::Nothing) => None,
                (None, StoredPack::Rebuild) => None,
                (Some(inferred), entry) => {
                    let args = PackArgs {
                        model: &model,
                        op,
                        params: inferred.params.nhwc(),
                        kernels,
                        constants: &constants,
                    };
                    match entry {
                        StoredPack::Packed(p) if executor::packed_fits(&p, &args) => Some(*p),
                        StoredPack::Packed(_) => return Err(misfit(k)),
                        _ => (imp.pack)(&args)?,
                    }
                }
                (None, StoredPack::Packed(_)) => return Err(misfit(k)),
            };
            steps.push(Step {
                op: k,
                imp: Some(imp),
                control: None,
                params,
                packed,
                aliased: false,
                out_order: SmallVec::new(),
            });
        }
        Ok(Plan {
            model,
            steps,
            constants,
            layout: None,
            arenas: ArrayQueue::new(POOLED_ARENAS),
            work: None,
            kernels,
            subgraphs: Vec::new(),
        })
    }

    /// A static plan needs a constant's decoded values only where a step reads them at run
    /// time; constants that every reader has packed are dropped, so the weights are held
    /// once. (The dynamic path keeps them: it infers shapes from them at execution.)
    fn release_packed_constants(&mut self) {
        let Some(layout) = &mut self.layout else {
            return;
        };
        let m = &self.model;
        let mut needed = vec![false; m.operands.len()];
        for step in &self.steps {
            for (pos, &i) in m.operations[step.op].inputs.iter().enumerate() {
                if step.packed.is_none() || !step.imp.is_some_and(|imp| imp.packs.contains(&pos)) {
                    needed[i] = true;
                }
            }
        }
        for &o in &m.outputs {
            needed[o] = true;
        }
        for (i, constant) in self.constants.iter_mut().enumerate() {
            if constant.is_some() && !needed[i] {
                *constant = None;
                layout.homes[i] = Home::Absent;
            }
        }
    }

    /// The model this plan runs.
    pub fn model(&self) -> &ValidModel {
        &self.model
    }

    /// The micro-kernel table the plan was compiled against.
    pub fn kernels(&self) -> &'static Ukernels {
        self.kernels
    }

    /// Whether executions run on the calling thread rather than the kernel pool.
    pub fn runs_inline(&self) -> bool {
        self.layout.is_some() && self.work.is_some_and(|w| w <= INLINE_MAX_WORK)
    }

    /// Whether the plan runs in a pre-planned arena (every shape static).
    pub fn is_static(&self) -> bool {
        self.layout.is_some()
    }

    /// Bytes of one execution arena (0 for the dynamic path).
    pub fn arena_bytes(&self) -> usize {
        self.layout.as_ref().map_or(0, |l| l.bytes)
    }

    /// Per step, the name of the registration chosen for it (for profiles).
    pub fn kernel_names(&self) -> Vec<&'static str> {
        self.steps
            .iter()
            .map(|s| match (s.imp, s.control) {
                (Some(imp), _) => imp.name,
                (None, Some(Control::If { .. })) => "IF",
                (None, _) => "WHILE",
            })
            .collect()
    }

    fn estimated_work(&self) -> Option<u64> {
        let m = &self.model;
        let elements = |o: usize| -> Option<u64> {
            shape::element_count(m.static_dims.get(o)?.as_deref()?).ok()
        };
        let mut total: u64 = 0;
        for step in &self.steps {
            let inferred = step.params.as_ref()?;
            let imp = step.imp?;
            let op = &m.operations[step.op];
            let mut read: u64 = 0;
            for &i in &op.inputs {
                if m.operands[i].lifetime != OperandLifeTime::NoValue {
                    read = read.saturating_add(elements(i)?);
                }
            }
            let mut written: u64 = 0;
            for dims in &inferred.outputs {
                written = written.saturating_add(shape::element_count(dims).ok()?);
            }
            let filter_dims = op
                .inputs
                .get(1)
                .and_then(|&i| m.static_dims.get(i)?.as_deref());
            total = total.saturating_add((imp.work)(&WorkArgs {
                params: inferred.params.nhwc(),
                read,
                written,
                filter_dims,
            }));
        }
        Some(total)
    }

    /// Places every non-constant operand in the arena, or `None` when the model is not fully
    /// static (or its arena would exceed the execution budget); see [`place`].
    fn plan_arena(&mut self, threads: usize) -> HalResult<Option<Layout>> {
        let m = &self.model;
        let n = m.operands.len();
        // An omitted optional operand has no extents and no home; operations that take it as
        // absent on both paths run with it in the arena plan (the others decide at execution).
        let absent_ok = readers_all(&m.operations, n, nnhal_hal::ops::omitted_input_is_absent);
        if self.steps.iter().any(|s| s.params.is_none())
            || m.inputs.iter().any(|&i| m.omittable[i])
            || m.static_dims
                .iter()
                .zip(&m.operands)
                .enumerate()
                .any(|(i, (d, o))| {
                    d.is_none()
                        && !(o.lifetime == OperandLifeTime::NoValue && absent_ok[i] != Some(false))
                })
        {
            return Ok(None);
        }
        // RESHAPE (and EXPAND_DIMS) outputs share their input's storage when that input lives
        // in the arena.
        let mut alias: Vec<usize> = (0..n).collect();
        for step in &mut self.steps {
            let op = &m.operations[step.op];
            if matches!(
                op.ty,
                nnhal_hal::OperationType::Reshape | nnhal_hal::OperationType::ExpandDims
            ) {
                let (i, o) = (op.inputs[0], op.outputs[0]);
                if self.constants[i].is_none() && !not_in_arena(m.operands[i].lifetime) {
                    alias[o] = alias[i];
                    step.aliased = true;
                }
            }
        }
        // Lifetimes in step time: model inputs are written at 0, step k runs at k + 1, model
        // outputs are read at steps + 1.
        let end = self.steps.len() + 1;
        let mut live: Vec<Option<(usize, usize)>> = vec![None; n];
        let mut touch = |o: usize, t: usize| {
            let r = alias[o];
            live[r] = Some(match live[r] {
                Some((a, b)) => (a.min(t), b.max(t)),
                None => (t, t),
            });
        };
        for &i in &m.inputs {
            touch(i, 0);
        }
        for (k, step) in self.steps.iter().enumerate() {
            let op = &m.operations[step.op];
            for &i in &op.inputs {
                if self.constants[i].is_none() && !not_in_arena(m.operands[i].lifetime) {
                    touch(i, k + 1);
                }
            }
            for &o in &op.outputs {
                touch(o, k + 1);
            }
        }
        for &o in &m.outputs {
            touch(o, end);
        }
        let mut values: Vec<Value> = Vec::new();
        for r in (0..n).filter(|&r| live[r].is_some()) {
            let elems = shape::element_count(m.static_dims[r].as_deref().unwrap_or(&[]))
                .map_err(HalError::InvalidArgument)? as usize;
            let (first, last) = live[r].expect("filtered on live");
            values.push(Value {
                operand: r,
                bytes: (elems * Elem::of(m.operands[r].ty)?.size()).div_ceil(64) * 64,
                first,
                last,
            });
        }
        let (offsets, total) = place(&values, threads);
        let mut offset_of = vec![0usize; n];
        for (v, at) in values.iter().zip(offsets) {
            offset_of[v.operand] = at;
        }
        if total as u64 > EXECUTION_MEMORY_BUDGET {
            return Ok(None);
        }
        let mut homes = Vec::with_capacity(n);
        for o in 0..n {
            homes.push(if let Some(c) = &self.constants[o] {
                Home::Constant(c.clone())
            } else if live[alias[o]].is_some() {
                let elems = shape::element_count(m.static_dims[o].as_deref().unwrap_or(&[]))
                    .map_err(HalError::InvalidArgument)? as usize;
                let elem = Elem::of(m.operands[o].ty)?;
                Home::Arena(Region {
                    offset: offset_of[alias[o]],
                    bytes: elems * elem.size(),
                    elem,
                })
            } else {
                Home::Absent
            });
        }
        // Every step's outputs must be disjoint from each other and from its inputs: the
        // arena is carved on that promise.
        for step in self.steps.iter_mut().filter(|s| !s.aliased) {
            let op = &m.operations[step.op];
            let region = |o: usize| match &homes[o] {
                Home::Arena(r) => Some(*r),
                _ => None,
            };
            let outs: Vec<Region> = op.outputs.iter().filter_map(|&o| region(o)).collect();
            if outs.len() != op.outputs.len() {
                return Err(HalError::GeneralFailure(format!(
                    "operation {}: an output has no arena slot",
                    step.op
                )));
            }
            for (a, ra) in outs.iter().enumerate() {
                let clash = outs[a + 1..].iter().any(|rb| ra.overlaps(rb))
                    || op
                        .inputs
                        .iter()
                        .filter_map(|&i| region(i))
                        .any(|ri| ra.overlaps(&ri));
                if clash {
                    return Err(HalError::GeneralFailure(format!(
                        "operation {}: the arena plan overlaps its operands",
                        step.op
                    )));
                }
            }
            let mut order: SmallVec<[usize; 4]> = (0..outs.len()).collect();
            order.sort_by_key(|&j| outs[j].offset);
            step.out_order = order;
        }
        Ok(Some(Layout {
            homes,
            bytes: total,
        }))
    }

    /// Runs one execution of a validated request, writing the outputs into its pools.
    /// With `profile`, the wall time of every operation is pushed in model order.
    /// WHILE loops stop after [`DEFAULT_LOOP_TIMEOUT`] with MISSED_DEADLINE_TRANSIENT.
    pub fn run(
        &self,
        bound: &BoundRequest,
        profile: Option<&mut Vec<Duration>>,
    ) -> HalResult<Vec<Vec<u32>>> {
        self.run_with_loop_timeout(bound, profile, DEFAULT_LOOP_TIMEOUT)
    }

    /// [`Plan::run`] with WHILE loops stopped after `loop_timeout`.
    pub fn run_with_loop_timeout(
        &self,
        bound: &BoundRequest,
        profile: Option<&mut Vec<Duration>>,
        loop_timeout: Duration,
    ) -> HalResult<Vec<Vec<u32>>> {
        match &self.layout {
            Some(layout) => {
                let mut arena = match self.arenas.pop() {
                    Some(a) => a,
                    None => AlignedBuf::try_zeroed(layout.bytes).ok_or_else(|| {
                        HalError::GeneralFailure(format!(
                            "cannot allocate an execution arena of {} bytes",
                            layout.bytes
                        ))
                    })?,
                };
                let result = self.run_static(layout, &mut arena, bound, profile);
                // A full pool means more executions ran at once than it keeps: drop the extra.
                let _ = self.arenas.push(arena);
                result
            }
            None => self.run_dynamic(
                bound,
                profile,
                Exec {
                    subgraphs: &self.subgraphs,
                    loop_timeout,
                    deadline: None,
                },
            ),
        }
    }

    fn run_static(
        &self,
        layout: &Layout,
        arena: &mut [u8],
        bound: &BoundRequest,
        mut profile: Option<&mut Vec<Duration>>,
    ) -> HalResult<Vec<Vec<u32>>> {
        let m = &self.model;
        for (pos, arg) in bound.inputs.iter().enumerate() {
            let (Some(arg), Home::Arena(r)) = (arg, &layout.homes[m.inputs[pos]]) else {
                continue;
            };
            read_input(
                &bound.pools[arg.pool],
                arg.offset,
                &mut arena[r.offset..r.end()],
                r.elem,
                Edge::of(m, m.inputs[pos]),
            )?;
        }
        for step in &self.steps {
            if step.aliased {
                if let Some(times) = profile.as_deref_mut() {
                    times.push(Duration::ZERO);
                }
                continue;
            }
            let started = profile.is_some().then(Instant::now);
            let op = &m.operations[step.op];
            let inferred = step
                .params
                .as_ref()
                .expect("static plans resolve every step");
            let (outs, gaps) = carve(arena, &layout.homes, &op.outputs, &step.out_order)?;
            // Room for every input and output of any operation (BIDIRECTIONAL_SEQUENCE_LSTM:
            // 61 and 6), so the steady state allocates none.
            let mut values: SmallVec<[Option<TensorRef>; 64]> = SmallVec::new();
            for &i in &op.inputs {
                values.push(match &layout.homes[i] {
                    Home::Absent => None,
                    Home::Constant(t) => Some(t.view()),
                    Home::Arena(r) => Some(TensorRef {
                        dims: m.static_dims[i].as_deref().unwrap_or(&[]),
                        data: view(find(&gaps, r)?, r.elem)?,
                    }),
                });
            }
            let mut out_views: SmallVec<[TensorMut; 6]> = SmallVec::new();
            for ((bytes, r), dims) in outs.into_iter().zip(&inferred.outputs) {
                if !step.imp.is_some_and(|imp| imp.fills) {
                    bytes.fill(0);
                }
                out_views.push(TensorMut {
                    dims,
                    data: view_mut(bytes, r.elem)?,
                });
            }
            self.invoke(step, &inferred.params, &values, &mut out_views)?;
            round_half_outputs(m, &op.outputs, &mut out_views)?;
            if let (Some(times), Some(t0)) = (profile.as_deref_mut(), started) {
                times.push(t0.elapsed());
            }
        }
        check_sufficient(m, bound, |pos| m.static_dims[m.outputs[pos]].as_deref())?;
        let mut shapes = Vec::with_capacity(m.outputs.len());
        for (pos, arg) in bound.outputs.iter().enumerate() {
            let o = m.outputs[pos];
            let dims = m.static_dims[o].clone().unwrap_or_default();
            let value = match &layout.homes[o] {
                Home::Arena(r) => view(&arena[r.offset..r.end()], r.elem)?,
                Home::Constant(t) => t.view().data,
                Home::Absent => {
                    return Err(HalError::GeneralFailure(format!(
                        "output {pos} was not computed"
                    )))
                }
            };
            write_output(pos, &dims, value, arg, bound, Edge::of(m, o))?;
            shapes.push(dims);
        }
        Ok(shapes)
    }

    /// Runs one step's registration on bound values.
    fn invoke(
        &self,
        step: &Step,
        params: &Params,
        values: &[Option<TensorRef>],
        outs: &mut [TensorMut],
    ) -> HalResult<()> {
        let imp = step.imp.ok_or_else(|| {
            HalError::GeneralFailure(format!("operation {} has no registration", step.op))
        })?;
        let call = Call {
            model: &self.model,
            op: &self.model.operations[step.op],
            params,
            packed: step.packed.as_ref(),
            kernels: self.kernels,
            values,
        };
        match params {
            Params::Nchw(nhwc) => executor::run_nchw(imp, &call, nhwc, outs),
            _ => (imp.run)(&call, outs),
        }
    }

    /// Whether an input of step `k` has a zero batch at execution (a first extent of 0, as
    /// BOX_WITH_NMS_LIMIT keeping no box produces; allowed since NNAPI 1.2).
    fn zero_batch(&self, k: usize, slots: &[Option<Arc<Tensor>>]) -> bool {
        let m = &self.model;
        m.operations[k].inputs.iter().any(|&i| {
            m.operands[i].ty.is_tensor()
                && slots[i]
                    .as_ref()
                    .is_some_and(|t| t.dims.first() == Some(&0))
        })
    }

    /// Output shapes and parameters of step `k` from the values bound at execution.
    ///
    /// A step with a zero-batch input produces zero-batch outputs without running: its shapes
    /// are those of the same inputs with batch 1, with the outputs' first extent 0 (every
    /// operation of the interface that accepts a zero batch keeps the batch first).
    fn infer_at_execution(&self, k: usize, slots: &[Option<Arc<Tensor>>]) -> HalResult<Inferred> {
        let m = &self.model;
        let op = &m.operations[k];
        let zero_batch = self.zero_batch(k, slots);
        let dims: Vec<Option<Vec<u32>>> = op
            .inputs
            .iter()
            .map(|&i| {
                slots[i].as_ref().map(|t| {
                    let mut d = t.dims.clone();
                    if let (true, Some(first @ 0)) = (m.operands[i].ty.is_tensor(), d.first_mut()) {
                        *first = 1;
                    }
                    d
                })
            })
            .collect();
        // Parameter bytes for inference: scalars and small integer tensors (shapes).
        let param_bytes: Vec<Option<Vec<u8>>> = op
            .inputs
            .iter()
            .map(|&i| {
                let o = &m.operands[i];
                let small = !o.ty.is_tensor() || (o.ty == OperandType::TensorInt32);
                slots[i]
                    .as_ref()
                    .filter(|t| small && t.data.len() <= 256)
                    .map(|t| t.data.to_le_bytes())
            })
            .collect();
        let args: Vec<Option<Arg>> = op
            .inputs
            .iter()
            .zip(&param_bytes)
            .zip(&dims)
            .map(|((&i, bytes), d)| {
                let o = &m.operands[i];
                d.as_ref().map(|d| Arg {
                    ty: o.ty,
                    dims: d,
                    scale: o.scale,
                    zero_point: o.zero_point,
                    value: bytes.as_deref(),
                })
            })
            .collect();
        let mut inferred = match shape::infer(op.ty, &args) {
            Ok(inferred) => inferred,
            // Output extents only the values decide (BOX_WITH_NMS_LIMIT).
            Err(InferError::Unknown) if executor::shape_at_run(op.ty).is_some() => {
                let values: SmallVec<[Option<TensorRef>; 12]> = op
                    .inputs
                    .iter()
                    .map(|&i| slots[i].as_deref().map(Tensor::view))
                    .collect();
                let call = Call {
                    model: m,
                    op,
                    params: &Params::Plain,
                    packed: None,
                    kernels: self.kernels,
                    values: &values,
                };
                let at_run = executor::shape_at_run(op.ty).expect("matched on is_some");
                at_run(&call)?
            }
            Err(InferError::Invalid(why)) => {
                return Err(HalError::InvalidArgument(format!(
                    "operation {k} ({}): {why}",
                    op.ty
                )))
            }
            Err(InferError::Unknown) => {
                return Err(HalError::InvalidArgument(format!(
                    "operation {k} ({}): a dimension or parameter is still unknown at execution",
                    op.ty
                )))
            }
        };
        // Operations with a variable number of outputs (the sequence RNN/LSTM) infer all they
        // may have, and the validator has checked the count they list.
        if inferred.params.output_counts().is_none() && inferred.outputs.len() != op.outputs.len() {
            return Err(HalError::InvalidArgument(format!(
                "operation {k} ({}): {} outputs, the operation lists {}",
                op.ty,
                inferred.outputs.len(),
                op.outputs.len()
            )));
        }
        if zero_batch {
            // CONCATENATION along the batch axis adds the batches; the zero ones add nothing.
            let batches = matches!(inferred.params, Params::Concat { axis: 0 }).then(|| {
                op.inputs
                    .iter()
                    .filter(|&&i| m.operands[i].ty.is_tensor())
                    .filter_map(|&i| slots[i].as_ref()?.dims.first().copied())
                    .sum::<u32>()
            });
            for out in &mut inferred.outputs {
                if let Some(first) = out.first_mut() {
                    *first = batches.unwrap_or(0);
                }
            }
        }
        for (&o, dims) in op.outputs.iter().zip(&inferred.outputs) {
            validate::check_declared(k, op.ty, o, &m.operands[o].dims, dims)?;
        }
        Ok(inferred)
    }

    /// The path for models only fully known at execution: every value in its own buffer,
    /// shapes inferred step by step, temporaries freed after their last reader.
    fn run_dynamic(
        &self,
        bound: &BoundRequest,
        profile: Option<&mut Vec<Duration>>,
        exec: Exec,
    ) -> HalResult<Vec<Vec<u32>>> {
        let m = &self.model;
        let mut slots: Vec<Option<Arc<Tensor>>> = self.constants.clone();
        let mut held: u64 = 0;
        for (pos, arg) in bound.inputs.iter().enumerate() {
            let Some(arg) = arg else { continue };
            let info = &m.operands[m.inputs[pos]];
            let need = validate::byte_size(info.ty, &arg.dims)?;
            held = charge(held, need)?;
            let count = shape::element_count(&arg.dims).map_err(HalError::InvalidArgument)?;
            let pool = &bound.pools[arg.pool];
            let mut data = match Edge::of(m, m.inputs[pos]) {
                Edge::Half => {
                    let mut data = Data::zeros(info.ty, count as usize)?;
                    if let Data::F32(v) = &mut data {
                        read_f16(pool, arg.offset, v)?;
                    }
                    data
                }
                _ => Data::read(info.ty, pool, arg.offset, count as usize)?,
            };
            if let (Edge::Signed, Data::U8(v)) = (Edge::of(m, m.inputs[pos]), &mut data) {
                flip_sign(v);
            }
            slots[m.inputs[pos]] = Some(Arc::new(Tensor {
                dims: arg.dims.clone(),
                data,
            }));
        }
        self.run_steps(&mut slots, held, profile, exec)?;

        check_sufficient(m, bound, |pos| {
            slots[m.outputs[pos]].as_deref().map(|t| t.dims.as_slice())
        })?;
        let mut shapes = Vec::with_capacity(m.outputs.len());
        for (pos, arg) in bound.outputs.iter().enumerate() {
            let t = slots[m.outputs[pos]].as_ref().ok_or_else(|| {
                HalError::GeneralFailure(format!("output {pos} was not computed"))
            })?;
            write_output(
                pos,
                &t.dims,
                t.view().data,
                arg,
                bound,
                Edge::of(m, m.outputs[pos]),
            )?;
            shapes.push(t.dims.clone());
        }
        Ok(shapes)
    }

    /// Runs every step on values held in `slots` (by operand index), inferring shapes
    /// where they were not known at prepare and freeing temporaries after their last reader.
    /// `held` is the operand memory the caller holds already (see [`EXECUTION_MEMORY_BUDGET`]).
    fn run_steps(
        &self,
        slots: &mut [Option<Arc<Tensor>>],
        mut held: u64,
        mut profile: Option<&mut Vec<Duration>>,
        exec: Exec,
    ) -> HalResult<()> {
        let m = &self.model;
        let mut remaining: Vec<u32> = m.operands.iter().map(|o| o.consumers).collect();
        for step in &self.steps {
            let k = step.op;
            let op = &m.operations[k];
            let started = profile.is_some().then(Instant::now);
            if let Some(control) = step.control {
                let outs = self.run_control(k, control, slots, exec)?;
                for (&o, t) in op.outputs.iter().zip(outs) {
                    validate::check_declared(k, op.ty, o, &m.operands[o].dims, &t.dims)?;
                    held = charge(held, value_bytes(&t))?;
                    slots[o] = Some(t);
                }
            } else {
                let dynamic;
                let zero_batch = self.zero_batch(k, slots);
                let inferred = match &step.params {
                    Some(inferred) if !zero_batch => inferred,
                    _ => {
                        dynamic = self.infer_at_execution(k, slots)?;
                        &dynamic
                    }
                };
                // A zero batch in and out reads and writes nothing.
                let empty = zero_batch && inferred.outputs.iter().all(|d| d.contains(&0));
                let mut outs = Vec::with_capacity(op.outputs.len());
                for (&o, dims) in op.outputs.iter().zip(&inferred.outputs) {
                    let info = &m.operands[o];
                    let count = shape::element_count(dims).map_err(HalError::InvalidArgument)?;
                    held = charge(held, count * info.ty.element_size().unwrap_or(1) as u64)?;
                    outs.push(Tensor {
                        dims: dims.clone(),
                        data: Data::zeros(info.ty, count as usize)?,
                    });
                }
                if !empty {
                    let values: SmallVec<[Option<TensorRef>; 12]> = op
                        .inputs
                        .iter()
                        .map(|&i| slots[i].as_deref().map(Tensor::view))
                        .collect();
                    let mut out_views: SmallVec<[TensorMut; 4]> =
                        outs.iter_mut().map(Tensor::view_mut).collect();
                    self.invoke(step, &inferred.params, &values, &mut out_views)?;
                    round_half_outputs(m, &op.outputs, &mut out_views)?;
                }
                for (&o, t) in op.outputs.iter().zip(outs) {
                    slots[o] = Some(Arc::new(t));
                }
            }
            if let (Some(times), Some(t0)) = (profile.as_deref_mut(), started) {
                times.push(t0.elapsed());
            }
            // Free temporaries after their last reader, as the reference executor does.
            for &i in &op.inputs {
                remaining[i] = remaining[i].saturating_sub(1);
                if remaining[i] == 0 && m.operands[i].lifetime == OperandLifeTime::TemporaryVariable
                {
                    if let Some(t) = slots[i].take() {
                        held = held.saturating_sub(value_bytes(&t));
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs this plan as a referenced subgraph: `inputs` are the values the IF or WHILE hands
    /// over (by value: the caller's tensors are shared, never written), the result is the
    /// subgraph's outputs in order. A value whose shape contradicts the subgraph input it is
    /// bound to (a WHILE body whose output changed shape against a declared input) is
    /// INVALID_ARGUMENT.
    fn run_subgraph(&self, inputs: &[Arc<Tensor>], exec: Exec) -> HalResult<Vec<Arc<Tensor>>> {
        let m = &self.model;
        let mut slots = self.constants.clone();
        let mut held: u64 = 0;
        for (pos, t) in inputs.iter().enumerate() {
            let &i = m.inputs.get(pos).ok_or_else(|| {
                HalError::InvalidArgument(format!(
                    "a subgraph of {} inputs is handed {}",
                    m.inputs.len(),
                    inputs.len()
                ))
            })?;
            let declared = &m.operands[i].dims;
            let agrees = declared.is_empty()
                || declared.len() == t.dims.len()
                    && declared
                        .iter()
                        .zip(&t.dims)
                        .all(|(&d, &a)| d == 0 || d == a);
            if !agrees {
                return Err(HalError::InvalidArgument(format!(
                    "subgraph input {pos} is declared {declared:?} but is handed a value of shape {:?}",
                    t.dims
                )));
            }
            held = charge(held, value_bytes(t))?;
            slots[i] = Some(Arc::clone(t));
        }
        self.run_steps(&mut slots, held, None, exec)?;
        m.outputs
            .iter()
            .enumerate()
            .map(|(pos, &o)| {
                slots[o].clone().ok_or_else(|| {
                    HalError::GeneralFailure(format!("subgraph output {pos} was not computed"))
                })
            })
            .collect()
    }

    /// IF runs one branch on the operation's data inputs; WHILE runs its body for as long as
    /// its condition holds, the body's outputs becoming its first inputs, and stops with
    /// MISSED_DEADLINE_TRANSIENT once the loop has taken longer than the loop timeout (as
    /// the platform's CPU executor does). The result is the operation's outputs.
    fn run_control(
        &self,
        k: usize,
        control: Control,
        slots: &[Option<Arc<Tensor>>],
        exec: Exec,
    ) -> HalResult<Vec<Arc<Tensor>>> {
        let op = &self.model.operations[k];
        let value = |i: usize| -> HalResult<Arc<Tensor>> {
            slots[i].clone().ok_or_else(|| {
                HalError::InvalidArgument(format!(
                    "operation {k} ({}): input operand {i} has no value",
                    op.ty
                ))
            })
        };
        let values = |from: usize| -> HalResult<Vec<Arc<Tensor>>> {
            op.inputs[from..].iter().map(|&i| value(i)).collect()
        };
        let truth = |t: &Tensor| -> HalResult<bool> {
            match &t.data {
                Data::U8(v) if v.len() == 1 => Ok(v[0] != 0),
                _ => Err(HalError::InvalidArgument(format!(
                    "operation {k} ({}): the condition is not one TENSOR_BOOL8 value",
                    op.ty
                ))),
            }
        };
        match control {
            Control::If { then, otherwise } => {
                let branch = if truth(&*value(op.inputs[0])?)? {
                    then
                } else {
                    otherwise
                };
                exec.subgraph(branch)?.run_subgraph(&values(3)?, exec)
            }
            Control::While { condition, body } => {
                let (cond_plan, body_plan) = (exec.subgraph(condition)?, exec.subgraph(body)?);
                let own = Instant::now().checked_add(exec.loop_timeout);
                let deadline = match (exec.deadline, own) {
                    (Some(outer), Some(own)) => Some(outer.min(own)),
                    (outer, own) => outer.or(own),
                };
                let inner = Exec { deadline, ..exec };
                let mut state = values(2)?;
                let mut iterations: u64 = 0;
                loop {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(HalError::MissedDeadline(format!(
                            "operation {k} (WHILE): the loop ran past its timeout of {:?} after {iterations} iterations",
                            exec.loop_timeout
                        )));
                    }
                    let go = cond_plan.run_subgraph(&state, inner)?;
                    if !truth(go.first().ok_or_else(|| {
                        HalError::GeneralFailure("the condition has no output".into())
                    })?)? {
                        break;
                    }
                    for (j, t) in body_plan
                        .run_subgraph(&state, inner)?
                        .into_iter()
                        .enumerate()
                    {
                        state[j] = t;
                    }
                    iterations += 1;
                }
                state.truncate(op.outputs.len());
                Ok(state)
            }
        }
    }
}

/// Bytes a value holds.
fn value_bytes(t: &Tensor) -> u64 {
    let elem = match &t.data {
        Data::F32(_) | Data::I32(_) => 4,
        Data::I16(_) => 2,
        Data::U8(_) => 1,
    };
    t.data.len() as u64 * elem
}

/// Every output buffer must hold its result. When one does not, nothing is written and the
/// error carries every output's shape and whether its buffer sufficed (as AIDL reports
/// OUTPUT_INSUFFICIENT_SIZE). The success path allocates nothing.
fn check_sufficient<'a>(
    m: &ValidModel,
    bound: &BoundRequest,
    dims_of: impl Fn(usize) -> Option<&'a [u32]>,
) -> HalResult<()> {
    let fits = |pos: usize| {
        let Some(dims) = dims_of(pos) else {
            return true; // reported as "not computed" by the writer
        };
        let elem = m.request_element_size(m.outputs[pos]) as u64;
        shape::element_count(dims).map_or(true, |n| n * elem <= bound.outputs[pos].length)
    };
    if (0..bound.outputs.len()).all(fits) {
        return Ok(());
    }
    let shapes: Vec<(Vec<u32>, bool)> = (0..bound.outputs.len())
        .map(|pos| (dims_of(pos).unwrap_or(&[]).to_vec(), fits(pos)))
        .collect();
    let short: Vec<usize> = (0..shapes.len()).filter(|&p| !shapes[p].1).collect();
    Err(HalError::OutputInsufficientShapes {
        message: format!("outputs {short:?} are too small for their results"),
        shapes,
    })
}

/// Checks an output against the request's argument and writes it into its pool.
fn write_output(
    pos: usize,
    dims: &[u32],
    value: DataRef,
    arg: &validate::BoundArg,
    bound: &BoundRequest,
    edge: Edge,
) -> HalResult<()> {
    // Unspecified (0) requested dimensions take the computed extent (dynamic output shapes).
    let agrees =
        dims.len() == arg.dims.len() && arg.dims.iter().zip(dims).all(|(&r, &d)| r == 0 || r == d);
    if !agrees {
        return Err(HalError::InvalidArgument(format!(
            "output {pos}: computed dimensions {dims:?} differ from the requested {:?}",
            arg.dims
        )));
    }
    let need = match value {
        DataRef::F32(v) if edge == Edge::Half => v.len() * 2,
        DataRef::F32(v) => v.len() * 4,
        DataRef::I32(v) => v.len() * 4,
        DataRef::U8(v) => v.len(),
        DataRef::I16(v) => v.len() * 2,
    };
    if need as u64 > arg.length {
        return Err(HalError::OutputInsufficientSize(format!(
            "output {pos}: {} bytes given, {need} needed",
            arg.length
        )));
    }
    let pool = &bound.pools[arg.pool];
    match value {
        DataRef::F32(v) if edge == Edge::Half => write_f16(pool, arg.offset, v),
        DataRef::F32(v) => write_words(pool, arg.offset, v),
        DataRef::I32(v) => write_words(pool, arg.offset, v),
        DataRef::I16(v) => write_halves(pool, arg.offset, v),
        DataRef::U8(v) if edge == Edge::Signed => {
            let mut shifted = v.to_vec();
            flip_sign(&mut shifted);
            pool.write(arg.offset, &shifted)
        }
        DataRef::U8(v) => pool.write(arg.offset, v),
    }
}

/// How a model input or output is encoded in request memory beside its value in the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Edge {
    /// As the plan holds it.
    Same,
    /// TENSOR_QUANT8_ASYMM_SIGNED held as its unsigned image.
    Signed,
    /// Binary16 (TENSOR_FLOAT16 / FLOAT16) held as float32.
    Half,
}

impl Edge {
    fn of(m: &ValidModel, operand: usize) -> Edge {
        if m.half.get(operand).copied().unwrap_or(false) {
            Edge::Half
        } else if m.signed.get(operand).copied().unwrap_or(false) {
            Edge::Signed
        } else {
            Edge::Same
        }
    }
}

/// Rounds the float16 outputs of one operation (computed in float32) to binary16, as the
/// specification stores them between operations. Float32 models skip this entirely.
fn round_half_outputs(m: &ValidModel, outputs: &[usize], views: &mut [TensorMut]) -> HalResult<()> {
    for (&o, view) in outputs.iter().zip(views.iter_mut()) {
        if m.half.get(o).copied().unwrap_or(false) {
            round_to_f16(view.f32_mut()?);
        }
    }
    Ok(())
}

/// Shifts quant8 bytes by 128 between the signed and unsigned encodings of one value
/// (`x ⊕ 0x80` maps -128..127 onto 0..255 in order).
fn flip_sign(bytes: &mut [u8]) {
    for b in bytes {
        *b ^= 0x80;
    }
}

fn charge(held: u64, bytes: u64) -> HalResult<u64> {
    let total = held.saturating_add(bytes);
    if total > EXECUTION_MEMORY_BUDGET {
        return Err(HalError::GeneralFailure(format!(
            "execution needs more than {EXECUTION_MEMORY_BUDGET} bytes of operand memory"
        )));
    }
    Ok(total)
}

/// One arena value to place: an operand (the root of its aliases), its size rounded up to
/// whole cache lines, and the steps it is live in.
#[derive(Clone, Debug)]
struct Value {
    operand: usize,
    bytes: usize,
    first: usize,
    last: usize,
}

/// Each value's offset and the arena's size, for executions on `threads` threads: on one
/// thread packed tightly ([`place_first_fit`]), on several with a rest of
/// [`REGION_COOL_DOWN`] steps before a freed region is taken again, and centred in slots
/// ([`place_in_slots`]) unless that needs more than half as much memory again.
fn place(values: &[Value], threads: usize) -> (Vec<usize>, usize) {
    if threads <= 1 {
        return place_first_fit(values, 0);
    }
    let (tight, tight_total) = place_first_fit(values, REGION_COOL_DOWN);
    let (centred, total) = place_in_slots(values, REGION_COOL_DOWN);
    if total <= tight_total + tight_total / 2 {
        (centred, total)
    } else {
        (tight, tight_total)
    }
}

/// Whether two values may not share bytes: their lives overlap, or one ends within
/// `cool_down` steps before the other starts.
fn conflict(a: &Value, b: &Value, cool_down: usize) -> bool {
    a.first <= b.last + cool_down && b.first <= a.last + cool_down
}

/// The tightest of the two placements: biggest value first, each at the lowest offset that no
/// conflicting value placed before it occupies. Returns each value's offset and the arena size.
fn place_first_fit(values: &[Value], cool_down: usize) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| {
        (values[b].bytes.cmp(&values[a].bytes)).then(values[a].operand.cmp(&values[b].operand))
    });
    let mut offsets = vec![0usize; values.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(values.len());
    let mut total = 0;
    for &v in &order {
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|&&q| conflict(&values[q], &values[v], cool_down))
            .map(|&q| (offsets[q], offsets[q] + values[q].bytes))
            .collect();
        busy.sort_unstable();
        let mut at = 0usize;
        for (s, e) in busy {
            if at + values[v].bytes <= s {
                break;
            }
            at = at.max(e);
        }
        offsets[v] = at;
        placed.push(v);
        total = total.max(at + values[v].bytes);
    }
    (offsets, total)
}

/// The placement for executions on several threads. The operators split their outputs into
/// one contiguous run of rows per thread, in thread order, so on two threads the first thread
/// writes (and the next operation reads there) the lower half of every value, the second the
/// upper half. Values are dealt into slots, each slot holding one value at a time, and centred
/// in their slot: every value in a slot then splits at the slot's middle, so each byte of the
/// arena stays with one core from operation to operation and from one execution to the next,
/// instead of moving to the other core's cache whenever two values of different sizes share
/// it (and paying for the move: on a virtual machine whose two processors sit on different
/// dies, 1.6 MB of depthwise input came across at a third of the speed).
///
/// Values are dealt in order of their first step, each to the slot freed most recently among
/// those it does not conflict with, preferring slots already big enough.
fn place_in_slots(values: &[Value], cool_down: usize) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by_key(|&v| (values[v].first, values[v].operand));
    // Per slot: its size and the value it holds last.
    let mut slots: Vec<(usize, usize)> = Vec::new();
    let mut slot_of = vec![0usize; values.len()];
    for &v in &order {
        let pick = {
            let free = |&s: &usize| !conflict(&values[slots[s].1], &values[v], cool_down);
            let newest = |&s: &usize| values[slots[s].1].last;
            (0..slots.len())
                .filter(free)
                .filter(|&s| slots[s].0 >= values[v].bytes)
                .max_by_key(newest)
                .or_else(|| (0..slots.len()).filter(free).max_by_key(newest))
        };
        let s = pick.unwrap_or_else(|| {
            slots.push((0, v));
            slots.len() - 1
        });
        slots[s] = (slots[s].0.max(values[v].bytes), v);
        slot_of[v] = s;
    }
    let mut starts = Vec::with_capacity(slots.len());
    let mut total = 0;
    for &(bytes, _) in &slots {
        starts.push(total);
        total += bytes;
    }
    let offsets = (0..values.len())
        .map(|v| {
            let s = slot_of[v];
            // Both sizes are whole lines, so the value stays line-aligned.
            starts[s] + (slots[s].0 - values[v].bytes) / 128 * 64
        })
        .collect();
    (offsets, total)
}

/// Operands that never take arena space: omitted ones, and constants (a constant without a
/// decoded value is one a compilation cache left out for the packed entries that replace
/// it).
fn not_in_arena(lifetime: OperandLifeTime) -> bool {
    matches!(
        lifetime,
        OperandLifeTime::NoValue
            | OperandLifeTime::ConstantCopy
            | OperandLifeTime::ConstantReference
    )
}

fn layout_error() -> HalError {
    HalError::GeneralFailure("an arena slot is misaligned or mis-sized".into())
}

/// Steps a freed arena region rests before another value may take it when executions run on
/// several threads. A value that a split operation has just read sits shared in every core's
/// cache; writing the next value over it at once pays a cross-core invalidation per line (the
/// 14×14 float depthwise layers of MobileNet, whose output landed on the buffer the
/// column-split GEMM before them had just read, ran at 38 µs on two threads instead of 21).
/// On one thread the just-freed region is the warmest place to write, so there is no rest.
const REGION_COOL_DOWN: usize = 1;

/// Inputs at least this long are copied in from their pool by all the team's threads.
const PARALLEL_INPUT_BYTES: usize = 128 << 10;

/// Copies an input's values from its request pool into its arena bytes. A large input (an
/// image) is split over the threads, in parts ordered like the first operation's rows, so the
/// copy is not a single-thread stretch at the start of every execution.
/// A signed quant8 input is flipped into its unsigned image as it arrives, a float16 one
/// widened to float32.
fn read_input(
    pool: &MappedPool,
    offset: u64,
    bytes: &mut [u8],
    elem: Elem,
    edge: Edge,
) -> HalResult<()> {
    // Request bytes per arena byte, in halves: binary16 takes half the room of its float32.
    let narrow = edge == Edge::Half;
    let one = |offset: u64, bytes: &mut [u8]| match elem {
        Elem::F32 if narrow => read_f16(pool, offset, cast_mut::<f32>(bytes)?),
        Elem::F32 => read_words(pool, offset, cast_mut::<f32>(bytes)?),
        Elem::I32 => read_words(pool, offset, cast_mut::<i32>(bytes)?),
        Elem::I16 => read_halves(pool, offset, cast_mut::<i16>(bytes)?),
        Elem::U8 => {
            pool.read(offset, bytes)?;
            if edge == Edge::Signed {
                flip_sign(bytes);
            }
            Ok(())
        }
    };
    let threads = nnhal_kernels::parallel::threads();
    if threads <= 1 || bytes.len() < PARALLEL_INPUT_BYTES {
        return one(offset, bytes);
    }
    // Whole 64-byte lines per part keep the element boundaries and the lines unshared.
    let part = bytes.len().div_ceil(2 * threads).next_multiple_of(64);
    let parts: SmallVec<[Mutex<&mut [u8]>; 8]> = bytes.chunks_mut(part).map(Mutex::new).collect();
    let failed: Mutex<Option<HalError>> = Mutex::new(None);
    nnhal_kernels::parallel::for_parts(parts.len(), |i| {
        let mut chunk = parts[i].lock().unwrap_or_else(|e| e.into_inner());
        let at = if narrow { i * part / 2 } else { i * part };
        if let Err(e) = one(offset + at as u64, &mut chunk) {
            *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        }
    });
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn cast_mut<T: bytemuck::Pod>(bytes: &mut [u8]) -> HalResult<&mut [T]> {
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| layout_error())
}

fn view(bytes: &[u8], elem: Elem) -> HalResult<DataRef<'_>> {
    let cast = |_| layout_error();
    Ok(match elem {
        Elem::F32 => DataRef::F32(bytemuck::try_cast_slice(bytes).map_err(cast)?),
        Elem::I32 => DataRef::I32(bytemuck::try_cast_slice(bytes).map_err(cast)?),
        Elem::I16 => DataRef::I16(bytemuck::try_cast_slice(bytes).map_err(cast)?),
        Elem::U8 => DataRef::U8(bytes),
    })
}

fn view_mut(bytes: &mut [u8], elem: Elem) -> HalResult<DataMut<'_>> {
    Ok(match elem {
        Elem::F32 => DataMut::F32(cast_mut(bytes)?),
        Elem::I32 => DataMut::I32(cast_mut(bytes)?),
        Elem::I16 => DataMut::I16(cast_mut(bytes)?),
        Elem::U8 => DataMut::U8(bytes),
    })
}

/// A read-only stretch of the arena between (or around) a step's outputs, with its offset.
type Gap<'a> = (usize, &'a [u8]);

/// Splits the arena into the step's output regions (mutable, in output order, each with its
/// region) and the read-only gaps around them, where every input of the step lies (the plan
/// checked that outputs overlap neither each other nor the inputs).
#[allow(clippy::type_complexity)]
fn carve<'a>(
    arena: &'a mut [u8],
    homes: &[Home],
    outputs: &[usize],
    order: &[usize],
) -> HalResult<(
    SmallVec<[(&'a mut [u8], Region); 6]>,
    SmallVec<[Gap<'a>; 7]>,
)> {
    let mut gaps: SmallVec<[Gap<'a>; 7]> = SmallVec::new();
    let mut slots: SmallVec<[Option<(&'a mut [u8], Region)>; 6]> =
        (0..outputs.len()).map(|_| None).collect();
    let mut rest: &'a mut [u8] = arena;
    let mut at = 0usize;
    for &j in order {
        let Home::Arena(r) = homes[outputs[j]] else {
            return Err(layout_error());
        };
        let (gap, tail) = std::mem::take(&mut rest)
            .split_at_mut_checked(r.offset - at)
            .ok_or_else(layout_error)?;
        let (out, tail) = tail
            .split_at_mut_checked(r.bytes)
            .ok_or_else(layout_error)?;
        gaps.push((at, gap));
        slots[j] = Some((out, r));
        at = r.end();
        rest = tail;
    }
    gaps.push((at, rest));
    let outs = slots
        .into_iter()
        .map(|s| s.ok_or_else(layout_error))
        .collect::<HalResult<_>>()?;
    Ok((outs, gaps))
}

/// The bytes of input region `r` inside the gap that holds it.
fn find<'a>(gaps: &[Gap<'a>], r: &Region) -> HalResult<&'a [u8]> {
    gaps.iter()
        .find(|(start, g)| *start <= r.offset && r.end() <= start + g.len())
        .map(|&(start, g)| &g[r.offset - start..r.end() - start])
        .ok_or_else(layout_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const LINE: usize = 64;

    fn value(operand: usize, lines: usize, first: usize, last: usize) -> Value {
        Value {
            operand,
            bytes: lines * LINE,
            first,
            last,
        }
    }

    /// Conflicting values never share a byte, every value is line-aligned inside the arena,
    /// and (`centred`) two values that share bytes split at the same point, to half a line.
    fn check(values: &[Value], cool_down: usize, offsets: &[usize], total: usize, centred: bool) {
        for (i, a) in values.iter().enumerate() {
            assert_eq!(offsets[i] % LINE, 0, "value {i} is not line-aligned");
            assert!(
                offsets[i] + a.bytes <= total,
                "value {i} ends past the arena"
            );
            for (j, b) in values.iter().enumerate().skip(i + 1) {
                let (a0, a1) = (offsets[i], offsets[i] + a.bytes);
                let (b0, b1) = (offsets[j], offsets[j] + b.bytes);
                let shared = a0 < b1 && b0 < a1 && a.bytes > 0 && b.bytes > 0;
                if conflict(a, b, cool_down) {
                    assert!(!shared, "conflicting values {i} and {j} share bytes");
                }
                if centred && shared {
                    let (ma, mb) = (a0 * 2 + a.bytes, b0 * 2 + b.bytes);
                    assert!(
                        ma.abs_diff(mb) <= LINE,
                        "values {i} and {j} share bytes but split at {} and {}",
                        ma / 2,
                        mb / 2
                    );
                }
            }
        }
    }

    /// MobileNet v1's float values (in lines of 64 bytes), each live from the step that
    /// writes it to the next.
    fn mobilenet_chain() -> Vec<Value> {
        let kib = [
            588, 1568, 1568, 3136, 784, 1568, 1568, 1568, 392, 784, 784, 784, 196,
        ];
        kib.iter()
            .enumerate()
            .map(|(k, &kib)| value(k, kib * 1024 / LINE, k, k + 1))
            .collect()
    }

    #[test]
    fn slots_keep_a_chain_split_at_three_fixed_points() {
        let values = mobilenet_chain();
        let (offsets, total) = place_in_slots(&values, REGION_COOL_DOWN);
        check(&values, REGION_COOL_DOWN, &offsets, total, true);
        // With the one-step rest a chain takes three slots in turn, each as big as its
        // biggest value: 3136 + 1568 + 1568 KiB.
        assert_eq!(total, 6272 * 1024);
        let mids: std::collections::BTreeSet<usize> = values
            .iter()
            .zip(&offsets)
            .map(|(v, &o)| (2 * o + v.bytes) / (2 * LINE))
            .collect();
        assert_eq!(mids.len(), 3, "split points {mids:?}");
    }

    #[test]
    fn first_fit_packs_a_chain_tighter_than_slots_at_one_thread() {
        let values = mobilenet_chain();
        let (offsets, total) = place_first_fit(&values, 0);
        check(&values, 0, &offsets, total, false);
        // Two buffers: the biggest value and the biggest pair around it.
        assert_eq!(total, (3136 + 1568) * 1024);
        assert_eq!(place(&values, 1).1, total);
        assert_eq!(place(&values, 2).1, 6272 * 1024);
    }

    fn values() -> impl Strategy<Value = Vec<Value>> {
        proptest::collection::vec((0usize..40, 0usize..30, 0usize..6), 1..40).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(k, (lines, first, len))| value(k, lines, first, first + len))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn placements_never_overlap_conflicting_values(values in values(), cool_down in 0usize..3) {
            let (offsets, total) = place_first_fit(&values, cool_down);
            check(&values, cool_down, &offsets, total, false);
            let (offsets, total) = place_in_slots(&values, cool_down);
            check(&values, cool_down, &offsets, total, true);
        }
    }
}
