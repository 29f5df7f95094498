"""The grader's compile check: every lab kernel a test launched must also compile for a real GPU,
in float32 where the lab declares float32.

The simulator runs Python that no GPU compiles (lists, dicts, most NumPy calls), and float64
arithmetic in a float32 kernel changes no simulated result. The plugin (kernellab.grading.plugin)
writes a `compile_request` for each kernel a test launched, in both modes (`launched_requests`),
with the argument types of that launch: the specialisation the launch really compiled. The runner
compiles them all in one child (kernellab.kernels.ptxas) with `gpu_compile_errors`, which names the
kernel, its argument types and the offending line of the student's file.

The float64 rule (`FLOAT64_RULE`, read from numba-cuda 0.30.4's PTX for sm_80): Numba types a float
literal, and a Python-float scalar passed at launch, as float64, so float64 comes from arithmetic
with a literal, a float64 accumulator (`acc = 0.0` then `acc += x[j]`: add.f64), `max(v, 0.0)`
(max.f64), `math.*` on a float64, and a launch with a Python float (the launch compiles a float64
specialisation: `a * x[i]` is mul.f64). The compiler narrows one operation back to float32 where that
cannot change the result (`x[i] * 2.0`, `x[i] + 0.5`: no .f64), not `x[i] * 0.1` (mul.f64) nor
`x[i] * 2.0 + 1.0` (fma.rn.f64). A comparison and a select stay float32: `v if v > 0.0 else 0.0`
compiles to `max.f32`. The cost is the GPU's FP64 rate: 1:2 of FP32 on H200, H100 and A100, 1:32 on
T4, 1:64 on Ada GeForce cards.

`canary_kernel` compiles wherever numba-cuda can compile at all, and is compiled first. Where it
fails too, the check itself cannot work on this machine (for example, cuda.core without a usable
nvJitLink falls back to the driver's linker, which needs a CUDA context the compile child does not
have), and the grader says so instead of failing every kernel the student wrote.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

from kernellab import occupancy
from kernellab.kernels import jit, ptxas
from kernellab.course import target

GPU_CHECK_CC = (8, 0)   # a real target every kernel in the course must compile for


FLOAT64_RULE = ("Numba types a float literal and a Python-float launch argument as float64: "
                "max(v, 0.0), a sum started at 0.0, x * 0.1, x * 2.0 + 1.0, math.* on a float64 and "
                "a kernel launched with a Python float compute in float64 (a lone x * 2.0 the "
                "compiler narrows back; a comparison and `v if v > 0.0 else 0.0` stay float32): "
                "write float32(0.1) and launch with np.float32(...). FP64 runs at 1:2 of FP32 on "
                "H200/H100/A100, 1:32 on T4, 1:64 on Ada GeForce")


def compile_request(kernel, argtypes, cc=GPU_CHECK_CC) -> dict:
    """A JSON-able request to compile `kernel` for `argtypes` in the compile child, with line
    info (through PTX, whose `.loc` lines the checks read), and checked for float64 arithmetic
    when it is a float32 kernel (`is_float32_kernel`). `float64_arguments` names the parameters
    launched as float64 where the lab declares float32 (a Python float at launch)."""
    request = ptxas.child_request(kernel, argtypes, occupancy.architecture(cc).cc, False)
    float32_only = is_float32_kernel(kernel, argtypes)
    request.update(lineinfo=True, float32_only=float32_only, return_ptx=float32_only,
                   figures_optional=True)   # it asks whether it compiles, not its registers
    if float32_only:
        request["float64_arguments"] = float64_arguments(kernel, argtypes)
    return request


def launched_requests(launches, module_prefix: str) -> list[dict]:
    """The compile requests of the lab kernels among `launches` (kernellab.gpu.launches.Launch
    records taken with their argument types, in either mode): one per kernel and argument types,
    those of the launch itself, so a kernel launched with a Python float is checked as the float64
    specialisation the launch compiled. Kernels of modules outside `module_prefix` (kernellab's
    own, the tests') are not the student's."""
    seen = {}
    for launch in launches:
        fn = getattr(launch.kernel, "py_func", None)
        if fn is not None and fn.__module__.startswith(module_prefix):
            seen.setdefault((id(launch.kernel), launch.argtypes), launch)
    return [compile_request(launch.kernel, launch.argtypes) for launch in seen.values()]


def canary_request() -> dict:
    """The check's control: `canary_kernel`, which compiles wherever compiling works."""
    from numba import types
    from kernellab.grading import compile_canary
    return compile_request(compile_canary.canary_kernel, (types.float32[::1],))


def gpu_compile_errors(requests: list[dict], server: ptxas.CompileServer | None = None,
                       canary: bool = True) -> list[str | None]:
    """Compile and link each request for a real GPU in one child (the `server`'s, where given):
    None if it did, else why not. A float32 kernel (`compile_request` marks it) that computes in
    float64 fails too, naming the line. The canary is compiled first (`canary=False` where the
    same server already compiled it): RuntimeError when it fails, since then the check cannot
    work on this machine."""
    if not requests:
        return []
    batch = [canary_request(), *requests] if canary else list(requests)
    answers = server.ask(batch) if server is not None else ptxas.run_child(batch)
    if canary:
        control, *answers = answers
        if "ok" not in control:
            raise RuntimeError(f"a kernel known to compile did not: {control['error']}")
    return [_problem(request, answer) for request, answer in zip(requests, answers)]


def _problem(request: dict, answer: dict) -> str | None:
    if "ok" not in answer:
        return answer["error"]
    if request.get("float32_only"):
        found = float64_arithmetic(answer["ok"]["ptx"])
        if found:
            return _float64_message(request["name"], found, request.get("float64_arguments", []))
    return None


# --- which kernels must stay float32 ---------------------------------------------------------------

def _float_types(argtypes) -> set[str]:
    """The float types among a signature's arguments, scalars and array elements alike."""
    found = set()
    for argtype in argtypes:
        name = str(getattr(argtype, "dtype", argtype))
        if name.startswith("float"):
            found.add(name)
    return found


def _declared_argtypes(kernel) -> list[tuple]:
    return [jit.numba_argtypes(kernel, sig) for sig in jit.declared_signatures(kernel)]


def is_float32_kernel(kernel, argtypes) -> bool:
    """A kernel its lab declares float32 (every float of its `SIGNATURES` is float32) must compute
    in float32 whatever it was launched with: a Python float passed to it makes a float64
    specialisation, and the check must see it. A kernel without declared signatures is judged by
    the float types it was launched with; one declared with a float64 argument may use float64."""
    declared = _declared_argtypes(kernel)
    return all(_float_types(types) == {"float32"} for types in (declared or [tuple(argtypes)]))


def float64_arguments(kernel, argtypes) -> list[str]:
    """The parameters of `kernel` launched as float64 scalars where its lab declares float32."""
    import inspect
    declared = _declared_argtypes(kernel)
    if not declared:
        return []
    names = list(inspect.signature(jit.python_function(kernel)).parameters)
    return [name for name, launched, wanted in zip(names, argtypes, declared[0])
            if str(launched) == "float64" and str(wanted) == "float32"]


# --- finding float64 arithmetic in PTX, and the line it came from ------------------------------------

_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.MULTILINE)
_OPCODE = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][a-z0-9]*(?:\.[a-z0-9]+)+)\s")


@dataclasses.dataclass(frozen=True)
class Float64Use:
    """The first float64 instruction of a kernel's PTX and the source line it came from."""

    instruction: str
    file: str | None
    line: int | None


def float64_arithmetic(ptx: str) -> Float64Use | None:
    """The first instruction that computes in float64 (add/mul/fma/div/selp/setp/max/cvt into
    or out of .f64, ...), with the file and line of the `.loc` before it; None if there is none.
    Loads, stores and moves are not arithmetic: a float32 kernel has none of .f64 anyway."""
    files = dict(_FILE.findall(ptx))
    where = (None, None)
    for text in ptx.splitlines():
        if (loc := _LOC.match(text)):
            where = (files.get(loc.group(1)), int(loc.group(2)))
            continue
        opcode = _OPCODE.match(text)
        if opcode is None:
            continue
        parts = opcode.group(1).split(".")
        if "f64" in parts and parts[0] not in ("ld", "st", "mov"):
            file, line = where
            return Float64Use(" ".join(text.split()).rstrip(";"), file, line or None)
    return None


def _float64_message(kernel_name: str, found: Float64Use, arguments=()) -> str:
    launched = ""
    if arguments:
        names = ", ".join(f"`{name}`" for name in arguments)
        launched = (f" (it was launched with a Python float for {names}: a float64 argument, so "
                    "the launch compiled a float64 kernel; launch with np.float32(...))")
    advice = f"{launched}\n{FLOAT64_RULE}"
    if found.file is None or found.line is None:
        return (f"lab kernel `{kernel_name}` computes in float64 (its first float64 instruction: "
                f"`{found.instruction}`){advice}")
    function = _function_at(found.file, found.line)
    name = function[0] if function else kernel_name
    message = f"lab kernel `{name}` computes in float64 at {ptxas.source_line(found.file, found.line)}"
    started = _float_literal_start(function, found.line) if function else None
    if started:
        variable, line = started
        message += (f" (`{variable}` starts as a float64 at line {line}: "
                    f"`{ptxas.line_text(found.file, line)}`)")
    return f"{message}{advice}"


_AUGMENTED = re.compile(r"^\s*(\w+)(?:\[[^\]]*\])?\s*[-+*/]=")
_LITERAL_START = r"^\s*{}\s*=\s*[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)\s*(#.*)?$"


def _float_literal_start(function, line: int):
    """For `acc += ...` at `line`: the variable and the earlier line of the function that set it
    to a bare float literal (`acc = 0.0`), the float64 the sum inherits; else None."""
    _, start, lines = function
    augmented = _AUGMENTED.match(lines[line - start])
    if augmented is None:
        return None
    literal = re.compile(_LITERAL_START.format(re.escape(augmented.group(1))))
    for number in range(line - 1, start - 1, -1):
        if literal.match(lines[number - start]):
            return augmented.group(1), number
    return None


def _function_at(path: str, line: int):
    """(name, first line, source lines) of the module-level function (kernel or device function)
    of the file at `path` whose source, decorators included, holds `line`; None if none does.
    Read from the file: the grader that asks has not imported the student's module."""
    try:
        source = Path(path).read_text()
        tree = target.parse_source(source, path)
    except (OSError, SyntaxError, ValueError):
        return None
    lines = source.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
            if start <= line <= node.end_lineno:
                return node.name, start, lines[start - 1:node.end_lineno]
    return None
