# reward/py_runner.py — grpo.c's host for a TRL-style Python reward function.
#
# Embedded in the grpo binary (the Makefile's .incbin) and run by
# reward/reward_python.c as  python3 -c <this text> file|module TARGET FUNCTION.
# It loads the function, then speaks the cmd: protocol (docs/reward-protocol.md)
# on its own copies of stdin/stdout: one start-up line, {"ready": {"name": N}} or
# {"error": TEXT}; then per request line one reply, {"rewards": [...]} or
# {"error": TEXT}. The function's stdout (print, subprocesses) goes to stderr,
# which the trainer relays to its log; it never reaches the protocol.
#
# The call is TRL's (GRPOTrainer._calculate_rewards): keyword arguments prompts,
# completions, completion_ids, every dataset column, trainer_state, log_extra and
# log_metric. Not here: reward models, TRL's environments, restarting after a failure.
import asyncio
import functools
import importlib
import importlib.util
import inspect
import json
import math
import numbers
import os
import sys
import traceback


class Failure(Exception):
    """What went wrong, as one line for the trainer's error message."""


class TrainerState:
    """transformers' TrainerState as grpo.c sends it: its fields (global_step,
    max_steps, epoch, num_train_epochs, logging_steps, ...) but log_history and
    stateful_callbacks, which say so when read."""

    _KNOWN = ("epoch", "max_steps", "num_train_epochs", "logging_steps", "eval_steps", "save_steps",
              "train_batch_size", "num_input_tokens_seen", "total_flos", "log_history", "best_metric",
              "best_global_step", "best_model_checkpoint", "is_local_process_zero",
              "is_world_process_zero", "is_hyper_param_search", "trial_name", "trial_params",
              "stateful_callbacks")

    def __init__(self, fields):
        self.__dict__.update(fields)

    def __getattr__(self, name):
        sent = ", ".join(sorted(self.__dict__)) or "nothing"
        if name in TrainerState._KNOWN:
            raise AttributeError(f"trainer_state.{name} is not passed by grpo.c (it passes {sent})")
        raise AttributeError(f"'TrainerState' object has no attribute '{name}'")

    def __repr__(self):
        return "TrainerState(" + ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()) + ")"


_noted = set()


def _note_once(what):
    if what not in _noted:
        _noted.add(what)
        print(f"{what}: not recorded by grpo.c (the values are dropped)", file=sys.stderr, flush=True)


def log_extra(column, values):
    """TRL's log_extra (extra completions-table columns); grpo.c drops them."""
    _note_once(f"log_extra({column!r})")


def log_metric(name, value):
    """TRL's log_metric (a scalar logged with the step's metrics); grpo.c drops it."""
    _note_once(f"log_metric({name!r})")


def user_traceback(exc, skip):
    """Prints exc's traceback to stderr without our own `skip` outermost frames."""
    tb = exc.__traceback__
    for _ in range(skip):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb, file=sys.stderr)
    sys.stderr.flush()


def describe(exc):
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def load(kind, target, attr):
    """The callable named by (kind, target, attr), and where it came from for messages."""
    if kind == "file":
        if not os.path.exists(target):
            raise Failure(f"{target}: no such file")
        if not os.path.isfile(target):
            raise Failure(f"{target}: not a regular file")
        # as `python3 FILE` would: the file's directory first on sys.path, so it
        # imports its neighbours; registered in sys.modules (pickle, dataclasses)
        name = os.path.splitext(os.path.basename(target))[0]
        sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
        spec = importlib.util.spec_from_file_location(name, target)
        if spec is None or spec.loader is None:
            raise Failure(f"{target}: not loadable as Python source")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        where = target
        try:
            spec.loader.exec_module(module)
        except BaseException as e:  # SystemExit at import is a failure too
            user_traceback(e, 1)
            raise Failure(f"loading {target} raised {describe(e)} (traceback above)") from None
    else:
        # TRL's trl/scripts/grpo.py: sys.path.insert(0, os.getcwd()), then import_module
        sys.path.insert(0, os.getcwd())
        where = f"module '{target}'"
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name and (target == e.name or target.startswith(e.name + ".")):
                raise Failure(f"no module named '{e.name}' in the working directory ({os.getcwd()}) or on "
                              f"PYTHONPATH") from None
            user_traceback(e, 1)
            raise Failure(f"importing {target} raised {describe(e)} (traceback above)") from None
        except BaseException as e:
            user_traceback(e, 1)
            raise Failure(f"importing {target} raised {describe(e)} (traceback above)") from None
    if not hasattr(module, attr):
        raise Failure(f"{where} has no attribute '{attr}'")
    func = getattr(module, attr)
    if not callable(func):
        raise Failure(f"'{attr}' in {where} is not callable (type {type(func).__name__})")
    return func


def callable_name(func):
    """TRL's get_callable_name: partials unwrapped, else __name__, else the class name."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def rewards_of(out, n):
    """The function's return value as a JSON-ready list: floats, None for no value."""
    if not isinstance(out, (list, tuple)) and hasattr(out, "tolist"):  # numpy arrays, torch tensors
        out = out.tolist()
    if not isinstance(out, (list, tuple)):
        raise Failure(f"returned {type(out).__name__}; expected a list with one float or None per completion")
    if len(out) != n:
        raise Failure(f"returned {len(out)} rewards for {n} completions")
    rewards = []
    for i, v in enumerate(out):
        if v is not None and not isinstance(v, numbers.Real) and hasattr(v, "item"):
            v = v.item()  # numpy scalars, one-element tensors
        if v is None:
            rewards.append(None)
            continue
        if not isinstance(v, numbers.Real):
            shown = repr(v)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise Failure(f"rewards[{i}] is a {type(v).__name__} ({shown}); expected a float or None")
        try:
            x = float(v)
        except OverflowError:
            raise Failure(f"rewards[{i}] = {v} does not fit a float") from None
        if math.isnan(x):  # TRL: NaN, like None, is left out of the nansum
            rewards.append(None)
        elif math.isinf(x):
            raise Failure(f"rewards[{i}] is {x}; rewards must be finite (None for no value)")
        else:
            rewards.append(x)
    return rewards


def score(func, request):
    prompts = request.pop("prompts")
    completions = request.pop("completions")
    completion_ids = request.pop("completion_ids")
    kwargs = request  # every dataset column, then what TRL adds
    kwargs["trainer_state"] = TrainerState(request.get("trainer_state") or {})
    kwargs["log_extra"] = log_extra
    kwargs["log_metric"] = log_metric
    try:
        out = func(prompts=prompts, completions=completions, completion_ids=completion_ids, **kwargs)
        if inspect.isawaitable(out):  # an async def reward, as TRL awaits it
            async def wait(aw):
                return await aw
            out = asyncio.run(wait(out))
    except BaseException as e:
        user_traceback(e, 1)
        raise Failure(f"raised {describe(e)} (traceback above)") from None
    return rewards_of(out, len(completions))


def main():
    kind, target, attr = sys.argv[1:4]
    sys.argv = [target]  # what the module sees: not our arguments
    # the protocol keeps its own copies of fd 0 and 1; the function's stdin is
    # /dev/null and its stdout our stderr, line by line
    proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8", newline="\n")
    proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8", newline="\n")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    sys.stdout.reconfigure(line_buffering=True, errors="backslashreplace")
    sys.stderr.reconfigure(errors="backslashreplace")

    def reply(obj):
        sys.stdout.flush()
        sys.stderr.flush()
        proto_out.write(json.dumps(obj, allow_nan=False) + "\n")
        proto_out.flush()

    try:
        func = load(kind, target, attr)
    except Failure as e:
        reply({"error": str(e)})
        return
    reply({"ready": {"name": callable_name(func)}})
    for line in proto_in:
        try:
            reply({"rewards": score(func, json.loads(line))})
        except Failure as e:
            reply({"error": str(e)})


main()
