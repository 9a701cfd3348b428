//! tokio-console instrumentation (`--cfg tokio_unstable`, feature `tracing`): the spans and
//! events the lock emits, checked field by field, with the nesting `console-subscriber`
//! reads. console-subscriber ties a span or an event to a resource or an async operation
//! by the spans *entered* on the thread when it is made (not by `tracing`'s parent), so
//! the layer below records that stack too, as console-subscriber keeps it.
//!
//! Run with `RUSTFLAGS="--cfg tokio_unstable" CARGO_TARGET_DIR=target/unstable cargo test
//! --features tracing --test console`.
#![cfg(all(tokio_unstable, feature = "tracing"))]

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_rwsem::{
    OwnedRwLockUpgradableReadGuard, OwnedRwLockWriteGuard, Policy, RwLock,
    RwLockUpgradableReadGuard, RwLockWriteGuard,
};
use tokio_test::task::spawn;
use tokio_test::{assert_pending, assert_ready};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

mod support;
use support::{assert_idle, panics};

// ---------------------------------------------------------------------------------------
// The capturing layer.

/// A field's value, with its type: console-subscriber adds a `u64` update only to a `u64`
/// attribute.
#[derive(Clone, Debug, PartialEq)]
enum Value {
    U64(u64),
    I64(i64),
    Bool(bool),
    Str(String),
    Debug(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U64(v) => write!(f, "{v}u64"),
            Value::I64(v) => write!(f, "{v}i64"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => write!(f, "{v}"),
            Value::Debug(v) => write!(f, "{v:?}"),
        }
    }
}

#[derive(Default)]
struct Fields(Vec<(String, Value)>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .push((field.name().into(), Value::Debug(format!("{value:?}"))));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.name().into(), Value::U64(value)));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.name().into(), Value::I64(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.name().into(), Value::Bool(value)));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().into(), Value::Str(value.into())));
    }
}

impl Fields {
    /// `name=value ...`, in the order the fields were recorded.
    fn render(&self) -> String {
        let fields: Vec<_> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        fields.join(" ")
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

/// A span, as made.
struct SpanRec {
    name: &'static str,
    fields: Fields,
    /// `tracing`'s parent (explicit, or the current span), as an index into `spans`.
    parent: Option<usize>,
    /// The spans entered on the thread when it was made, outermost first.
    entered: Vec<usize>,
    closed: bool,
}

/// An event, as emitted.
struct EventRec {
    target: String,
    fields: Fields,
    /// The spans entered on the thread, outermost first.
    entered: Vec<usize>,
}

/// What may make the layer panic, once.
#[derive(Clone, Copy, Debug)]
enum Trigger {
    /// Making a span of this name.
    Span(&'static str),
    /// Entering a span of this name.
    Enter(&'static str),
    /// An event whose fields render to this.
    Event(&'static str),
    /// Every event whose fields contain this, from now on (never used up).
    Every(&'static str),
}

#[derive(Default)]
struct Log {
    spans: Vec<SpanRec>,
    events: Vec<EventRec>,
    /// The entered spans (one thread: every test polls on its own thread).
    stack: Vec<usize>,
    /// Panic at the trigger, after letting it pass this many times.
    panic_on: Option<(Trigger, usize)>,
}

/// The index of a span in `Log::spans`, kept in the registry's extensions (the registry
/// reuses ids).
struct Index(usize);

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Log>>);

impl Capture {
    /// Takes the trigger if `hit`, to panic once the log's lock is released.
    fn fire(log: &mut Log, hit: impl Fn(Trigger) -> bool) -> bool {
        match &mut log.panic_on {
            Some((Trigger::Every(_), _)) => hit(log.panic_on.unwrap().0),
            Some((trigger, skip)) if hit(*trigger) => {
                if *skip == 0 {
                    log.panic_on = None;
                    return true;
                }
                *skip -= 1;
                false
            }
            _ => false,
        }
    }
}

fn index<S: Subscriber + for<'a> LookupSpan<'a>>(ctx: &Context<'_, S>, id: &Id) -> Option<usize> {
    ctx.span(id)?.extensions().get::<Index>().map(|i| i.0)
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let parent = ctx
            .span(id)
            .and_then(|span| span.parent())
            .and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let name = attrs.metadata().name();
        let fire = {
            let mut log = self.0.lock().unwrap();
            let i = log.spans.len();
            let entered = log.stack.clone();
            log.spans.push(SpanRec {
                name,
                fields,
                parent,
                entered,
                closed: false,
            });
            ctx.span(id).unwrap().extensions_mut().insert(Index(i));
            Self::fire(&mut log, |t| matches!(t, Trigger::Span(n) if n == name))
        };
        if fire {
            panic!("the subscriber panics making {name}");
        }
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let rendered = fields.render();
        let fire = {
            let mut log = self.0.lock().unwrap();
            let entered = log.stack.clone();
            log.events.push(EventRec {
                target: event.metadata().target().into(),
                fields,
                entered,
            });
            Self::fire(&mut log, |t| match t {
                Trigger::Event(e) => e == rendered,
                Trigger::Every(part) => rendered.contains(part),
                _ => false,
            })
        };
        if fire {
            panic!("the subscriber panics at {rendered}");
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(i) = index(&ctx, id) else { return };
        let fire = {
            let mut log = self.0.lock().unwrap();
            log.stack.push(i);
            let name = log.spans[i].name;
            Self::fire(&mut log, |t| matches!(t, Trigger::Enter(n) if n == name))
        };
        if fire {
            panic!("the subscriber panics entering a span");
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(i) = index(&ctx, id) else { return };
        let mut log = self.0.lock().unwrap();
        if let Some(at) = log.stack.iter().rposition(|&s| s == i) {
            log.stack.remove(at);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(i) = index(&ctx, &id) else { return };
        self.0.lock().unwrap().spans[i].closed = true;
    }
}

/// Runs `f` under the capturing layer (panicking once at `panic_on`, if given), and
/// returns the log. `f` may look at the log so far.
fn capture(panic_on: Option<(Trigger, usize)>, f: impl FnOnce(&Mutex<Log>)) -> Log {
    let capture = Capture::default();
    capture.0.lock().unwrap().panic_on = panic_on;
    let log = Arc::clone(&capture.0);
    let subscriber = tracing_subscriber::registry().with(capture);
    tracing::subscriber::with_default(subscriber, || f(&log));
    // Nothing may keep the subscriber alive past `f` (a span the lock leaked would). But
    // another test's thread that registers a callsite rebuilds tracing's interest caches,
    // and holds every registered subscriber for that moment (`tracing-core` upgrades its
    // weak references to them): a second reference that goes away at once. So wait for
    // it, a bounded time, before calling the subscriber leaked.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut log = log;
    let log = loop {
        match Arc::try_unwrap(log) {
            Ok(log) => break log,
            Err(held) if std::time::Instant::now() < deadline => {
                log = held;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(_) => panic!("the subscriber is still held after the test (a leaked span?)"),
        }
    }
    .into_inner()
    .unwrap();
    match log.panic_on {
        None | Some((Trigger::Every(_), _)) => {}
        Some(trigger) => panic!("the subscriber never reached {trigger:?}"),
    }
    log
}

const STATE: &str = "runtime::resource::state_update";
const OP_STATE: &str = "runtime::resource::async_op::state_update";
const POLL_OP: &str = "runtime::resource::poll_op";

impl Log {
    /// The indices of the spans called `name`.
    fn spans_named(&self, name: &str) -> Vec<usize> {
        (0..self.spans.len())
            .filter(|&i| self.spans[i].name == name)
            .collect()
    }

    /// The resource spans of this crate's locks (tokio's own resources have spans too:
    /// console-subscriber turns on tokio's `tracing` feature).
    fn locks(&self) -> Vec<usize> {
        self.spans_named("runtime.resource")
            .into_iter()
            .filter(|&i| {
                self.spans[i].fields.get("concrete_type") == Some(&Value::Str("RwLock".into()))
            })
            .collect()
    }

    /// The one lock's resource span.
    fn resource(&self) -> usize {
        let resources = self.locks();
        assert_eq!(resources.len(), 1, "one lock");
        resources[0]
    }

    /// The events with `target`, each rendered, with the names of the spans entered when
    /// it was emitted.
    fn events(&self, target: &str) -> Vec<(String, Vec<&'static str>)> {
        self.events
            .iter()
            .filter(|e| e.target == target)
            .map(|e| {
                let entered = e.entered.iter().map(|&s| self.spans[s].name).collect();
                (e.fields.render(), entered)
            })
            .collect()
    }

    /// The resource's state updates, rendered, each checked to be emitted inside the
    /// resource span (the innermost resource entered, as console-subscriber looks it up).
    fn state(&self) -> Vec<String> {
        let resource = self.resource();
        self.events
            .iter()
            .filter(|e| e.target == STATE)
            .map(|e| {
                let inner = e
                    .entered
                    .iter()
                    .rev()
                    .find(|&&s| self.spans[s].name == "runtime.resource");
                assert_eq!(
                    inner,
                    Some(&resource),
                    "a state update outside the resource"
                );
                e.fields.render()
            })
            .collect()
    }

    /// The async operations on the lock: the fields of each, in the order made. (Its
    /// resource is the innermost one entered when it was made, as console-subscriber
    /// looks it up.)
    fn sources(&self) -> Vec<String> {
        let resource = self.resource();
        self.spans_named("runtime.resource.async_op")
            .into_iter()
            .filter(|&i| {
                let entered = &self.spans[i].entered;
                let inner = entered
                    .iter()
                    .rev()
                    .find(|&&s| self.spans[s].name == "runtime.resource");
                inner == Some(&resource)
            })
            .map(|i| self.spans[i].fields.render())
            .collect()
    }
}

/// The state updates a new lock's resource span starts with (the default reader limit).
fn initial() -> Vec<String> {
    vec![
        format!("max_readers={}u64 max_readers.op=override", max_readers()),
        "write_locked=false write_locked.op=override".into(),
        "current_readers=0u64 current_readers.op=override".into(),
    ]
}

/// The default reader limit: the count word's (2^55 - 1 on 64-bit targets).
fn max_readers() -> u64 {
    if cfg!(target_pointer_width = "64") {
        (1 << 55) - 1
    } else {
        (1 << 23) - 1
    }
}

const ADD: &str = "current_readers=1u64 current_readers.op=add";
const SUB: &str = "current_readers=1u64 current_readers.op=sub";
const W_ON: &str = "write_locked=true write_locked.op=override";
const W_OFF: &str = "write_locked=false write_locked.op=override";

fn queue_at_once() -> Policy {
    Policy::new()
        .writer_spin(Duration::ZERO)
        .writer_yields(0)
        .handoff_timeout(Duration::MAX)
}

// ---------------------------------------------------------------------------------------
// The resource span and the lock's state.

#[test]
fn the_resource_span_is_made_at_the_first_acquire_with_the_construction_site() {
    let mut line = 0;
    let log = capture(None, |log| {
        let lock = RwLock::new(0);
        line = line!() - 1;
        // `const` constructors make no span, nor do state queries: none until the first
        // acquire starts.
        assert!(!lock.is_locked());
        assert!(log.lock().unwrap().spans.is_empty());
        drop(lock.try_read().unwrap());
        assert_eq!(log.lock().unwrap().spans.len(), 1);
        drop(lock);
    });
    let resource = log.resource();
    let span = &log.spans[resource];
    assert_eq!(span.parent, None, "a root span");
    assert!(span.entered.is_empty());
    let text = include_str!("console.rs")
        .lines()
        .nth(line as usize - 1)
        .unwrap();
    let col = text.find("RwLock::new").unwrap() + 1;
    assert_eq!(
        span.fields.render(),
        format!(
            "concrete_type=RwLock kind=Sync is_internal=false loc.file={} loc.line={line}u64 \
             loc.col={col}u64",
            file!()
        )
    );
    assert_eq!(span.fields.get("is_internal"), Some(&Value::Bool(false)));
    let mut expected = initial();
    expected.extend([ADD.to_string(), SUB.to_string()]);
    assert_eq!(log.state(), expected);
    assert!(span.closed, "dropping the lock closes its span");
    assert!(
        log.sources().is_empty(),
        "a try_ acquire is no async operation"
    );
}

#[test]
fn default_and_from_report_their_caller() {
    let log = capture(None, |_| {
        let a = RwLock::<u8>::default();
        let b = RwLock::from(1u8);
        drop((a.try_read(), b.try_read()));
    });
    let files: Vec<_> = log
        .locks()
        .into_iter()
        .map(|i| log.spans[i].fields.get("loc.file").cloned())
        .collect();
    let here = Some(Value::Str(file!().into()));
    assert_eq!(files, [here.clone(), here]);
}

#[test]
fn state_updates_at_read_write_release_and_mode_changes() {
    let log = capture(None, |_| {
        let lock = RwLock::with_max_readers(0, 5);
        let r1 = lock.try_read().unwrap();
        let r2 = lock.try_read().unwrap();
        drop((r1, r2));
        let w = lock.try_write().unwrap();
        let r = RwLockWriteGuard::downgrade(w);
        drop(r);
        let w = lock.try_write().unwrap();
        let up = RwLockWriteGuard::downgrade_to_upgradable(w);
        let w = RwLockUpgradableReadGuard::try_upgrade(up).unwrap();
        drop(w);
        let up = lock.try_upgradable_read().unwrap();
        let r = RwLockUpgradableReadGuard::downgrade(up);
        drop(r);
        drop(lock.blocking_write());
    });
    let mut expected = vec![
        "max_readers=5u64 max_readers.op=override".to_string(),
        W_OFF.into(),
        "current_readers=0u64 current_readers.op=override".into(),
    ];
    expected.extend(
        [
            ADD, ADD, SUB, SUB, // two readers
            W_ON, W_OFF, ADD, SUB, // write, downgrade, release
            W_ON, W_OFF, ADD, // write, downgrade to upgradable
            SUB, W_ON, W_OFF, // upgrade, release
            ADD, SUB, // upgradable read, downgrade (nothing), release
            W_ON, W_OFF, // a blocking write
        ]
        .map(String::from),
    );
    assert_eq!(log.state(), expected);
}

#[test]
fn a_release_reports_the_write_lock_another_writer_took_meanwhile() {
    // The release is reported after the raw release: if a writer took the lock in
    // between, `write_locked` stays true. Here the second writer is granted the lock by
    // the first one's fair release (a handoff), before the first one's report.
    let log = capture(None, |_| {
        let lock = RwLock::with_policy(0, queue_at_once());
        let w = lock.try_write().unwrap();
        let mut w2 = spawn(lock.write());
        assert_pending!(w2.poll());
        RwLockWriteGuard::unlock_fair(w);
        drop(assert_ready!(w2.poll()));
    });
    let state = log.state();
    assert_eq!(
        state[3..],
        [W_ON, W_ON, W_ON, W_OFF].map(String::from),
        "the first writer's release saw the second writer owning the lock"
    );
}

// ---------------------------------------------------------------------------------------
// Async operations.

#[test]
fn an_async_acquire_is_an_async_op_under_the_resource() {
    let log = capture(None, |_| {
        let lock = RwLock::with_policy(0, queue_at_once());
        let w = lock.try_write().unwrap();
        let mut r = spawn(lock.read());
        assert_pending!(r.poll());
        drop(w);
        drop(assert_ready!(r.poll()));
    });
    let resource = log.resource();
    let ops = log.spans_named("runtime.resource.async_op");
    assert_eq!(ops.len(), 1);
    let op = &log.spans[ops[0]];
    assert_eq!(
        op.fields.render(),
        "source=RwLock::read inherits_child_attrs=false"
    );
    // console-subscriber finds the operation's resource among the entered spans.
    assert_eq!(op.entered, [resource]);
    assert_eq!(op.parent, Some(resource));
    let polls = log.spans_named("runtime.resource.async_op.poll");
    assert_eq!(polls.len(), 1);
    assert_eq!(log.spans[polls[0]].entered, [resource, ops[0]]);
    assert_eq!(log.spans[polls[0]].parent, Some(ops[0]));

    let inside = vec![
        "runtime.resource",
        "runtime.resource.async_op",
        "runtime.resource.async_op.poll",
    ];
    assert_eq!(
        log.events(OP_STATE),
        [
            (
                "readers_acquired=0u64 readers_acquired.op=override".to_string(),
                vec!["runtime.resource", "runtime.resource.async_op"]
            ),
            (
                "readers_acquired=1u64 readers_acquired.op=add".to_string(),
                inside.clone()
            ),
        ]
    );
    assert_eq!(
        log.events(POLL_OP),
        [
            ("op_name=poll is_ready=false".to_string(), inside.clone()),
            ("op_name=poll is_ready=true".to_string(), inside.clone()),
        ]
    );
    let mut expected = initial();
    expected.extend([W_ON, W_OFF, ADD, SUB].map(String::from));
    assert_eq!(log.state(), expected);
    assert!(log.spans[ops[0]].closed && log.spans[polls[0]].closed);
}

/// The lock's async operations, each `source` without `inherits_child_attrs = false`
/// (checked), and the operations' state updates that say they got the lock.
fn ops(log: &Log) -> (Vec<String>, Vec<String>) {
    let sources = log
        .sources()
        .into_iter()
        .map(|s| {
            let source = s.strip_suffix(" inherits_child_attrs=false");
            source.expect("inherits_child_attrs=false").to_string()
        })
        .collect();
    let done = log
        .events(OP_STATE)
        .into_iter()
        .map(|(e, _)| e)
        .filter(|e| e.starts_with("readers_acquired") || e.starts_with("write_locked"))
        .filter(|e| !e.contains("override") || e.contains("=true"))
        .collect();
    (sources, done)
}

const READ_DONE: &str = "readers_acquired=1u64 readers_acquired.op=add";

#[test]
fn every_async_acquire_names_its_source() {
    let log = capture(None, |_| {
        let lock = Arc::new(RwLock::new(0));
        tokio_test::block_on(async {
            drop(lock.read().await);
            drop(lock.write().await);
            drop(lock.upgradable_read().await);
            drop(Arc::clone(&lock).read_owned().await);
            drop(Arc::clone(&lock).write_owned().await);
            drop(Arc::clone(&lock).upgradable_read_owned().await);
            let up = lock.upgradable_read().await;
            drop(RwLockUpgradableReadGuard::upgrade(up).await);
            let up = Arc::clone(&lock).upgradable_read_owned().await;
            let w: OwnedRwLockWriteGuard<i32> = OwnedRwLockUpgradableReadGuard::upgrade(up).await;
            drop(w);
        });
        // A blocking acquire runs the async one (as tokio's does).
        drop(lock.blocking_read());
    });
    let (sources, done) = ops(&log);
    assert_eq!(
        sources,
        [
            "RwLock::read",
            "RwLock::write",
            "RwLock::upgradable_read",
            "RwLock::read_owned",
            "RwLock::write_owned",
            "RwLock::upgradable_read_owned",
            "RwLock::upgradable_read",
            "RwLockUpgradableReadGuard::upgrade",
            "RwLock::upgradable_read_owned",
            "OwnedRwLockUpgradableReadGuard::upgrade",
            "RwLock::read",
        ]
        .map(|s| format!("source={s}"))
    );
    let (r, w) = (READ_DONE, W_ON);
    assert_eq!(done, [r, w, r, r, w, r, r, w, r, w, r]);
}

#[cfg(feature = "tokio")]
#[test]
fn a_timed_acquire_is_one_async_op_named_after_it() {
    let log = capture(None, |_| {
        let lock = RwLock::new(0);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let d = Duration::from_secs(60);
            drop(lock.read_timeout(d).await.unwrap());
            drop(lock.write_timeout(d).await.unwrap());
            drop(lock.upgradable_read_timeout(d).await.unwrap());
            // One that gives up: its operation is dropped without the lock.
            let r = lock.read().await;
            assert!(lock.write_timeout(Duration::from_millis(1)).await.is_err());
            drop(r);
        });
    });
    let (sources, done) = ops(&log);
    assert_eq!(
        sources,
        [
            "RwLock::read_timeout",
            "RwLock::write_timeout",
            "RwLock::upgradable_read_timeout",
            "RwLock::read",
            "RwLock::write_timeout",
        ]
        .map(|s| format!("source={s}"))
    );
    assert_eq!(done, [READ_DONE, W_ON, READ_DONE, READ_DONE]);
    let last = *log.spans_named("runtime.resource.async_op").last().unwrap();
    assert!(
        log.spans[last].closed,
        "the expired acquire's operation is closed"
    );
}

// ---------------------------------------------------------------------------------------
// A subscriber that panics, wherever the lock calls it: the lock is left usable, with
// nothing held and nothing queued.

/// Runs `f` under a layer that panics at the `skip`-th next `trigger` (0: the first).
fn panicking(trigger: Trigger, skip: usize, f: impl FnOnce(&Mutex<Log>)) -> Log {
    capture(Some((trigger, skip)), f)
}

#[test]
fn a_panic_making_the_resource_span_leaves_it_unmade_and_the_lock_idle() {
    let log = panicking(Trigger::Span("runtime.resource"), 0, |_| {
        let lock = RwLock::new(0);
        panics(|| drop(lock.try_read()));
        assert_idle(&lock); // and this acquire makes the span
        drop(assert_ready!(spawn(lock.read()).poll()));
    });
    assert_eq!(log.locks().len(), 2);
    let mut expected = initial();
    expected.extend([W_ON, W_OFF, ADD, SUB].map(String::from));
    let made = *log.locks().last().unwrap();
    let state: Vec<_> = log
        .events
        .iter()
        .filter(|e| e.target == STATE && e.entered.contains(&made))
        .map(|e| e.fields.render())
        .collect();
    assert_eq!(state, expected);
}

#[test]
fn a_panic_at_an_acquire_s_state_update_releases_the_lock() {
    for skip in 0..2 {
        panicking(Trigger::Event(ADD), 0, |_| {
            let lock = RwLock::new(0);
            if skip == 0 {
                panics(|| drop(lock.try_read()));
            } else {
                panics(|| drop(spawn(lock.read()).poll()));
            }
            assert_idle(&lock);
        });
    }
    panicking(Trigger::Event(W_ON), 0, |_| {
        let lock = RwLock::with_policy(0, queue_at_once());
        let r = lock.try_read().unwrap();
        let mut w = spawn(lock.write());
        assert_pending!(w.poll());
        drop(r);
        panics(|| drop(w.poll()));
        drop(w);
        assert_idle(&lock);
    });
}

#[test]
fn a_panic_at_a_release_s_state_update_leaves_the_lock_released() {
    panicking(Trigger::Event(SUB), 0, |_| {
        let lock = RwLock::new(0);
        let r = lock.try_read().unwrap();
        panics(|| drop(r));
        assert_idle(&lock);
    });
    panicking(Trigger::Event(W_OFF), 1, |_| {
        let lock = Arc::new(RwLock::new(0));
        let w = Arc::clone(&lock).try_write_owned().unwrap();
        panics(|| drop(w));
        assert_idle(&lock);
        assert_eq!(Arc::strong_count(&lock), 1, "the guard's Arc was dropped");
    });
}

#[test]
fn a_subscriber_panicking_at_every_update_cannot_abort_the_process() {
    // The acquire's update panics, the unwind drops the guard, whose release's update
    // panics again: that one must not escape the drop (a panic during an unwind aborts).
    capture(Some((Trigger::Every("current_readers=1u64"), 0)), |_| {
        let lock = RwLock::new(0);
        panics(|| drop(lock.try_read()));
        panics(|| drop(spawn(lock.read()).poll()));
        assert_idle(&lock);
    });
}

#[test]
fn a_panic_at_a_mode_change_s_state_update_releases_the_new_mode() {
    // The downgrade's `current_readers` add, after its `write_locked = false`.
    panicking(Trigger::Event(ADD), 0, |_| {
        let lock = RwLock::new(0);
        let w = lock.try_write().unwrap();
        panics(|| drop(RwLockWriteGuard::downgrade(w)));
        assert_idle(&lock);
    });
    // The upgrade's `write_locked = true`.
    panicking(Trigger::Event(W_ON), 0, |_| {
        let lock = RwLock::new(0);
        let up = lock.try_upgradable_read().unwrap();
        panics(|| drop(RwLockUpgradableReadGuard::try_upgrade(up)));
        assert_idle(&lock);
    });
}

#[test]
fn a_panic_making_an_async_op_holds_nothing() {
    panicking(Trigger::Span("runtime.resource.async_op"), 0, |_| {
        let lock = RwLock::with_policy(0, queue_at_once());
        let w = lock.try_write().unwrap();
        panics(|| drop(spawn(lock.read()).poll()));
        drop(w);
        assert_idle(&lock);
    });
    panicking(Trigger::Span("runtime.resource.async_op.poll"), 0, |_| {
        let lock = RwLock::new(0);
        panics(|| drop(spawn(lock.write()).poll()));
        assert_idle(&lock);
    });
    // An upgrade's: the upgradable read lock is released.
    panicking(Trigger::Span("runtime.resource.async_op"), 0, |_| {
        let lock = RwLock::new(0);
        let up = lock.try_upgradable_read().unwrap();
        panics(|| drop(spawn(RwLockUpgradableReadGuard::upgrade(up)).poll()));
        assert_idle(&lock);
    });
    panicking(Trigger::Span("runtime.resource.async_op"), 0, |_| {
        let lock = Arc::new(RwLock::new(0));
        let up = Arc::clone(&lock).try_upgradable_read_owned().unwrap();
        panics(|| drop(spawn(OwnedRwLockUpgradableReadGuard::upgrade(up)).poll()));
        assert_idle(&lock);
        assert_eq!(Arc::strong_count(&lock), 1);
    });
}

#[test]
fn a_panic_entering_a_queued_acquire_s_spans_leaves_it_queued_and_cancellable() {
    // The second poll's entry of the poll span panics, before the acquire is polled.
    panicking(Trigger::Enter("runtime.resource.async_op.poll"), 1, |_| {
        let lock = RwLock::with_policy(0, queue_at_once());
        let w = lock.try_write().unwrap();
        let mut r = spawn(lock.read());
        assert_pending!(r.poll());
        panics(|| drop(r.poll()));
        drop(r);
        drop(w);
        assert_idle(&lock);
    });
}

#[test]
fn a_panic_after_a_poll_drops_what_it_returned() {
    // Pending: the acquire stays queued (the panic is outside its `async` body), and a
    // later poll gets the lock; or, dropped, it leaves the queue.
    for repoll in [true, false] {
        panicking(Trigger::Event("op_name=poll is_ready=false"), 0, |_| {
            let lock = RwLock::with_policy(0, queue_at_once());
            let w = lock.try_write().unwrap();
            let mut r = spawn(lock.read());
            panics(|| drop(r.poll()));
            drop(w);
            assert!(r.is_woken(), "the acquire stayed queued and was granted");
            if repoll {
                let guard = assert_ready!(r.poll());
                assert!(lock.try_write().is_err());
                drop(guard);
            }
            drop(r);
            assert_idle(&lock);
        });
    }
    // Ready: the guard is dropped, which releases the lock.
    for event in [
        "op_name=poll is_ready=true",
        "readers_acquired=1u64 readers_acquired.op=add",
    ] {
        panicking(Trigger::Event(event), 0, |_| {
            let lock = RwLock::new(0);
            panics(|| drop(spawn(lock.read()).poll()));
            assert_idle(&lock);
        });
    }
    panicking(
        Trigger::Event("write_locked=true write_locked.op=override"),
        1,
        |_| {
            // Skipped once: the resource's update; this is the operation's.
            let lock = RwLock::new(0);
            panics(|| drop(spawn(lock.write()).poll()));
            assert_idle(&lock);
        },
    );
}

// ---------------------------------------------------------------------------------------
// console-subscriber itself: the lock, read back through its gRPC API as tokio-console
// reads it.

mod through_console_subscriber {
    use std::collections::HashMap;
    use std::sync::mpsc;
    use std::time::Instant;

    use console_api::field::{Name, Value as Val};
    use console_api::instrument::instrument_client::InstrumentClient;
    use console_api::instrument::{InstrumentRequest, Update};

    use super::*;

    /// What the console knows: resources and async ops by id, each with its attributes.
    #[derive(Default)]
    struct View {
        resources: HashMap<u64, console_api::resources::Resource>,
        resource_attrs: HashMap<u64, HashMap<String, Val>>,
        ops: HashMap<u64, console_api::async_ops::AsyncOp>,
        op_attrs: HashMap<u64, HashMap<String, Val>>,
        /// The task awaiting each async op.
        op_task: HashMap<u64, u64>,
        /// Where each task was spawned: (file, line).
        tasks: HashMap<u64, (String, u32)>,
    }

    fn attrs(attributes: &[console_api::Attribute]) -> HashMap<String, Val> {
        attributes
            .iter()
            .filter_map(|a| {
                let field = a.field.as_ref()?;
                match (field.name.as_ref()?, field.value.as_ref()?) {
                    (Name::StrName(name), value) => Some((name.clone(), value.clone())),
                    _ => None,
                }
            })
            .collect()
    }

    impl View {
        fn apply(&mut self, update: Update) {
            if let Some(tasks) = update.task_update {
                for t in tasks.new_tasks {
                    let loc = t.location.unwrap_or_default();
                    let at = (loc.file.unwrap_or_default(), loc.line.unwrap_or_default());
                    self.tasks.insert(t.id.unwrap().id, at);
                }
            }
            if let Some(resources) = update.resource_update {
                for r in resources.new_resources {
                    self.resources.insert(r.id.unwrap().id, r);
                }
                for (id, stats) in resources.stats_update {
                    self.resource_attrs.insert(id, attrs(&stats.attributes));
                }
            }
            if let Some(ops) = update.async_op_update {
                for op in ops.new_async_ops {
                    self.ops.insert(op.id.unwrap().id, op);
                }
                for (id, stats) in ops.stats_update {
                    self.op_attrs.insert(id, attrs(&stats.attributes));
                    if let Some(task) = stats.task_id {
                        self.op_task.insert(id, task.id);
                    }
                }
            }
        }

        /// The id of the lock made at `line` of this file.
        fn lock(&self, line: u32) -> Option<u64> {
            self.resources.iter().find_map(|(&id, r)| {
                let loc = r.location.as_ref()?;
                (r.concrete_type == "RwLock"
                    && loc.file.as_deref() == Some(file!())
                    && loc.line == Some(line))
                .then_some(id)
            })
        }

        /// The async ops of resource `id` called `source`.
        fn ops_of(&self, id: u64, source: &str) -> Vec<u64> {
            let mut ops: Vec<_> = self
                .ops
                .iter()
                .filter(|(_, op)| op.source == source && op.resource_id.map(|r| r.id) == Some(id))
                .map(|(&i, _)| i)
                .collect();
            ops.sort();
            ops
        }
    }

    /// Applies updates from `rx` until `done` holds (panics after 20 s).
    fn until(view: &mut View, rx: &mpsc::Receiver<Update>, done: impl Fn(&View) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(view) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(update) => view.apply(update),
                Err(e) => panic!(
                    "the console never showed the expected state: {e}; resources {:?}, ops \
                     {:?} {:?}, tasks {:?} {:?}",
                    view.resource_attrs, view.ops, view.op_attrs, view.op_task, view.tasks
                ),
            }
        }
    }

    #[test]
    fn the_console_lists_the_lock_its_state_and_its_waiting_acquire() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (layer, server) = console_subscriber::ConsoleLayer::builder()
            .server_addr(([127, 0, 0, 1], port))
            .publish_interval(Duration::from_millis(10))
            .build();
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        // Every thread reports to the console, as under a global default (a callsite first
        // hit on a thread without the subscriber would stay off: with one dispatcher,
        // `tracing` caches each callsite's interest from the thread that hits it first).
        let runtime = || {
            let dispatch = dispatch.clone();
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .on_thread_start(move || {
                    std::mem::forget(tracing::dispatcher::set_default(&dispatch));
                })
                .build()
                .unwrap()
        };
        // The console's server and a client, as tokio-console is, on a runtime of their
        // own; the application's tasks on another.
        let (console, app) = (runtime(), runtime());
        tracing::dispatcher::with_default(&dispatch, || {
            console.spawn(server.serve());
            let (tx, rx) = mpsc::channel();
            console.spawn(async move {
                let url = format!("http://127.0.0.1:{port}");
                let mut client = loop {
                    match InstrumentClient::connect(url.clone()).await {
                        Ok(client) => break client,
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                };
                let request = client.watch_updates(InstrumentRequest {});
                let mut updates = request.await.unwrap().into_inner();
                while let Ok(Some(update)) = updates.message().await {
                    if tx.send(update).is_err() {
                        break;
                    }
                }
            });

            let lock = Arc::new(RwLock::with_policy(0, queue_at_once()));
            let line = line!() - 1;
            let text = include_str!("console.rs")
                .lines()
                .nth(line as usize - 1)
                .unwrap();
            let col = text.find("RwLock::with_policy").unwrap() as u32 + 1;
            let mut view = View::default();

            // Two readers inside, a writer task waiting.
            let r1 = lock.try_read().unwrap();
            let r2 = lock.try_read().unwrap();
            let (release, released) = tokio::sync::oneshot::channel::<()>();
            let writer = {
                let lock = Arc::clone(&lock);
                app.spawn(async move {
                    let guard = lock.write().await;
                    released.await.unwrap();
                    drop(guard);
                })
            };
            // Where the writer task was spawned (the one `app.spawn(` of this file).
            let spawned = include_str!("console.rs")
                .lines()
                .position(|l| l.contains(&["app", ".spawn("].concat()))
                .unwrap() as u32
                + 1;
            until(&mut view, &rx, |v| {
                v.lock(line).is_some_and(|id| {
                    let ops = v.ops_of(id, "RwLock::write");
                    let state = v.resource_attrs.get(&id);
                    state.and_then(|a| a.get("current_readers")) == Some(&Val::U64Val(2))
                        && ops.len() == 1
                        && v.op_task
                            .get(&ops[0])
                            .is_some_and(|t| v.tasks.contains_key(t))
                })
            });
            let id = view.lock(line).unwrap();
            let resource = &view.resources[&id];
            let loc = resource.location.as_ref().unwrap();
            assert_eq!((loc.line, loc.column), (Some(line), Some(col)));
            assert!(!resource.is_internal);
            assert_eq!(
                resource.kind.as_ref().and_then(|k| k.kind.clone()),
                Some(console_api::resources::resource::kind::Kind::Other(
                    "Sync".into()
                ))
            );
            let state = &view.resource_attrs[&id];
            assert_eq!(state["write_locked"], Val::BoolVal(false));
            assert_eq!(state["max_readers"], Val::U64Val(max_readers()));
            let op = view.ops_of(id, "RwLock::write")[0];
            assert_eq!(view.op_attrs[&op]["write_locked"], Val::BoolVal(false));
            // The operation is the writer task's.
            let task = view.op_task[&op];
            assert_eq!(view.tasks[&task], (file!().to_string(), spawned));

            // The readers leave; the writer gets in.
            drop((r1, r2));
            until(&mut view, &rx, |v| {
                let state = &v.resource_attrs[&id];
                let op = v.op_attrs.get(&op);
                state.get("write_locked") == Some(&Val::BoolVal(true))
                    && state.get("current_readers") == Some(&Val::U64Val(0))
                    && op.and_then(|a| a.get("write_locked")) == Some(&Val::BoolVal(true))
            });
            release.send(()).unwrap();
            app.block_on(writer).unwrap();
            until(&mut view, &rx, |v| {
                v.resource_attrs[&id].get("write_locked") == Some(&Val::BoolVal(false))
            });
        });
        app.shutdown_background();
        console.shutdown_background();
    }
}
