"""The user's own model as a workload.

A user writes a factory, a function of no arguments (or of `data_dir`, given --data DIR as a Path, so its paths need
not be hard-coded), in a file or an importable module:

    def make():
        model = MyNet()
        return dlperf.user_workload("my-net", model, make_batch, torch.nn.functional.cross_entropy, batch_size=32)

and names it as ``path/to/file.py:make`` or ``package.module:make``. The factory runs only in child processes (the probe
and the worker), never in the process that plans the sweep, because it imports a framework.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib
import importlib.util
import inspect
import os
import re
import reprlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlperf.errors import UsageError, where_in_user_code

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass
class UserWorkload:
    """What a factory returns: framework objects, so it lives only in a child process."""

    name: str
    model: Any  # a torch.nn.Module
    # (batch_size, device) -> (inputs, targets) on the device: the batch the paper's protocol times. None with a
    # dataset or a loader: its first sample repeated to the batch size (the backend's, frameworks/torch/user.py)
    make_batch: Callable[[int, Any], tuple[Any, Any]] | None
    loss: Callable[[Any, Any], Any]  # (outputs, targets) -> scalar loss
    batch_size: int
    optimizer: Any = None  # parameters -> optimizer, or one built over the model's; default SGD(lr=0.01)
    framework: str = "torch"
    clip_grad_norm: float | None = None
    dataset: Any = None  # a torch Dataset of (input, target) samples: what `--data dataset` or `--data DIR` reads
    loader: Callable[..., Any] | None = None  # or (batch_size, **DataLoader keyword arguments) -> a DataLoader

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"workload name {self.name!r}: use letters, digits and . _ + - (starting with a letter)")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.model is None:
            raise ValueError("model is None: pass your model (a torch.nn.Module) as dlperf.user_workload's second "
                             "argument, model")  # fmt: skip
        if not callable(self.loss):
            raise ValueError("loss must be callable")
        if not callable(self.make_batch) and not (self.make_batch is None and self.data_given):
            raise ValueError(
                "make_batch must be callable, or pass dataset= or loader= to draw the batch from its first sample"
            )
        if self.loader is not None and not callable(self.loader):
            raise ValueError("loader must be callable: (batch_size, **DataLoader keyword arguments) -> a DataLoader")
        if self.make_batch is not None and (took := _arguments_refused(self.make_batch, 1, "cpu")):
            raise ValueError(f"make_batch is called make_batch(batch_size, device), and {took}: give it both, "
                             "and make the batch on that device")  # fmt: skip

    @property
    def data_given(self) -> bool:
        return self.dataset is not None or self.loader is not None


def _arguments_refused(function: Callable[..., Any], *args: Any) -> str | None:
    """Why `function` cannot be called with `args`, read from its signature: "its signature is (b)" (a make_batch of
    the batch size alone, a JAX habit, failed every cell with "takes 1 positional argument but 2 were given"); None
    where it can, or its signature cannot be read."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*args)
    except TypeError:
        return f"its signature is {signature}"
    return None


def user_workload(
    name: str,
    model: Any,
    make_batch: Callable[[int, Any], tuple[Any, Any]] | None,
    loss: Callable[[Any, Any], Any],
    *,
    batch_size: int,
    optimizer: Any = None,
    clip_grad_norm: float | None = None,
    dataset: Any = None,
    loader: Callable[..., Any] | None = None,
) -> UserWorkload:
    """Describe a workload built from your own model; return it from a factory function.

    Two kinds of cell read two things. Every cell times the paper's protocol: one batch already on the device, made once
    by `make_batch(batch_size, device)` -> (inputs, targets), so the step's own cost is measured apart from loading. The
    step is `loss(model(inputs), targets)`; a dict of inputs is passed by name, `model(**inputs)` (a Hugging Face
    model's input_ids and attention_mask). With `dataset=` (or `loader=`) and no `make_batch` (None), that batch is the
    dataset's first sample (the loader's, asked for batches of one without workers) repeated to the batch size: its
    shape and dtype, with no sample read beyond the first. The loader cells (`--data dataset` or `--data DIR`) time the
    data as training reads it: `dataset` (a torch Dataset of (input, target) samples, batched and shuffled by a
    DataLoader of each loader setting) or `loader(batch_size, **kwargs)` (your own DataLoader, given num_workers,
    pin_memory and the rest of the setting); its batches must be shaped as the synthetic batch. `optimizer`: a function
    of the parameters (`lambda params: torch.optim.AdamW(params, lr=3e-4)`), an optimizer class, or one built over
    `model.parameters()`; by default SGD with a learning rate of 0.01."""
    return UserWorkload(name, model, make_batch, loss, batch_size, optimizer, clip_grad_norm=clip_grad_norm,
                        dataset=dataset, loader=loader)  # fmt: skip


def looks_like_source(text: str) -> bool:
    """`file.py:factory` or `package.module:factory`, as opposed to a built-in workload name."""
    return ":" in text


def split_source(source: str) -> tuple[str, str]:
    target, _, attr = source.rpartition(":")
    if not target or not attr.isidentifier():
        raise UsageError(f"workload {source!r}: expected path/to/file.py:factory or package.module:factory")
    return target, attr


def normalize_source(source: str) -> str:
    """Make a file path absolute, so the child finds it whatever its working directory."""
    target, attr = split_source(source)
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser()
        if why := not_a_source_file(path):
            raise UsageError(f"workload {source!r}: {why}")
        return f"{path.resolve()}:{attr}"
    return source


def not_a_source_file(path: Path) -> str | None:
    """Why `path` is no Python file to import a factory from (a folder, another kind of file, nothing there, a name
    too long to look up); None where it is one."""
    try:
        if path.is_file():
            return None if path.suffix == ".py" else f"{str(path)!r} is not a Python file (expected path/to/file.py)"
        return f"{str(path)!r} is a directory, not a Python file" if path.is_dir() else f"no such file {str(path)!r}"
    except OSError as exc:  # ENAMETOOLONG, which Path.is_file() raises
        return f"{str(path)!r} cannot be looked at ({exc.strerror or exc})"


def source_of(factory: Callable[[], Any]) -> str:
    """The `file.py:name` of a module-level factory function, for the Python API."""
    if not (inspect.isfunction(factory) or inspect.isclass(factory) or inspect.ismethod(factory)):
        raise UsageError(f"{reprlib.repr(factory)}, of type {type(factory).__name__}, is no workload: pass the "
                         "module-level function that builds one (make, not make()), or a 'file.py:factory' "
                         "string")  # fmt: skip
    name = getattr(factory, "__qualname__", "")
    module = sys.modules.get(getattr(factory, "__module__", None) or "")
    if not name.isidentifier():  # a lambda, or a function defined in another's body
        name = _module_name_of(factory, module) or name
    if not name.isidentifier():
        raise UsageError(f"{factory!r}: pass a module-level factory function or a 'file.py:factory' string (a lambda "
                         "or a function defined inside another has no name a new process can import)")  # fmt: skip
    named = module is not None and factory.__module__ != "__main__" and getattr(module, "__spec__", None)
    if named and not _found_only_here(module):
        return f"{factory.__module__}:{name}"
    path = inspect.getsourcefile(factory)
    # ipykernel names a cell /tmp/ipykernel_PID/HASH.py, a file its debugger may write: importing it reruns the cell
    cell = path is not None and re.search(r"ipykernel_\d+[/\\]\d+\.py$", path)
    if path is None or cell or not Path(path).is_file():  # typed in: stdin, python -c, a notebook's cell
        where = f" ({path})" if path else ""
        raise UsageError(f"{name} is not defined in a file{where}: dlperf builds the model in processes of its own, "
                         "which import the factory from its file; put it in one (mine.py) and pass "
                         f"'mine.py:{name}', or import it from there")  # fmt: skip
    return f"{Path(path).resolve()}:{name}"


def _module_name_of(factory: Callable[[], Any], module: Any) -> str | None:
    """The one module-level name `factory` is bound to (`make = lambda: ...`), which a new process importing the
    module finds; None where it is bound to none, or to several."""
    names = [name for name, value in vars(module).items() if value is factory] if module is not None else []
    return names[0] if len(names) == 1 else None


def _found_only_here(module: Any) -> bool:
    """Whether `module` is a file of its own (not a package's) that a new process would not find: imported through a
    folder this one added to sys.path (a notebook's `sys.path.insert(0, "models")`), neither the working directory nor
    one on PYTHONPATH or of the interpreter's own. dlperf's processes then import it by its file."""
    import site
    import sysconfig

    file = getattr(module, "__file__", None)
    if "." in module.__name__ or not file or not file.endswith(".py") or Path(file).name == "__init__.py":
        return False
    folders = [os.getcwd(), *os.environ.get("PYTHONPATH", "").split(os.pathsep), *sysconfig.get_paths().values()]
    folders += [*site.getsitepackages(), site.getusersitepackages()]
    found = {Path(f).resolve() for f in folders if f}
    return Path(file).resolve().parent not in found


NEIGHBOUR = "file:"  # a digest's key for a module the factory's file imports from its own directory


def source_digests(workloads: Iterable[Any]) -> dict[str, str]:
    """The SHA-256 of each user workload's factory file (`file.py:make`), by source, and of the modules that file
    imports from its own directory (its neighbours, as `_import_file` lets it), by `NEIGHBOUR` and path: a run keeps
    them with its environment, and `--resume` checks that what is left would train the model the run began with. A
    module source (`package.module:make`) is not read: finding its file would import its package."""
    digests = {}
    for w in workloads:
        if w.is_user and (path := Path(split_source(w.source)[0])).suffix == ".py" and path.is_file():
            digests[w.source] = _digest(path)
            digests |= {f"{NEIGHBOUR}{n}": _digest(n) for n in neighbours(path)}
    return digests


def _digest(path: Path) -> str:
    import hashlib  # the user's files' digests and names (userfiles): not for the parsers `dlperf --help` builds

    return hashlib.sha256(path.read_bytes()).hexdigest()


def neighbours(path: Path) -> list[Path]:
    """The files of the modules `path` imports, directly or through each other, from its own directory, found by
    reading their code (`modulefinder`), never by running it."""
    finder = _finder(str(path.parent.resolve()))
    try:
        finder.run_script(str(path))
    except (SyntaxError, OSError, ImportError):  # the factory's import says what is wrong, with its line
        return []
    found = {Path(m.__file__).resolve() for name, m in finder.modules.items() if name != "__main__" and m.__file__}
    return sorted((found | finder.files) - {path.resolve()})


def _finder(folder: str):
    """A `modulefinder.ModuleFinder` over `folder` that also follows a folder without an __init__.py (a namespace
    package: `from models import layers` imports models/layers.py), which modulefinder's own lookup fails on with an
    AttributeError."""
    import importlib.machinery
    import modulefinder

    class Finder(modulefinder.ModuleFinder):
        def __init__(self, path: list[str]) -> None:
            super().__init__(path=path)
            self.namespaces: set[str] = set()
            # every module file found, those that could not be read too (a syntax error behind a guarded import:
            # fixed, it changes what the model's file imports)
            self.files: set[Path] = set()

        def find_module(self, name, path, parent=None):
            spec = importlib.machinery.PathFinder.find_spec(name, self.path if path is None else path)
            if spec is not None and spec.loader is None and spec.submodule_search_locations:
                self.namespaces.add(where := next(iter(spec.submodule_search_locations)))
                return None, where, ("", "", modulefinder._PKG_DIRECTORY)
            found = super().find_module(name, path, parent)
            if found[1] and Path(found[1]).is_file():
                self.files.add(Path(found[1]).resolve())
            return found

        def load_package(self, fqname, pathname):
            if pathname not in self.namespaces:
                return super().load_package(fqname, pathname)
            module = self.add_module(fqname)  # no __init__ to read: its __file__ stays None
            module.__path__ = [pathname]
            return module

    return Finder(path=[folder])


def changed_sources(digests: dict[str, str]) -> list[str]:
    """Of the files `source_digests` read, those edited or removed since: "PATH changed", "PATH is gone"."""
    changed = []
    for source, digest in digests.items():
        path = Path(source.removeprefix(NEIGHBOUR) if source.startswith(NEIGHBOUR) else split_source(source)[0])
        if not path.is_file():
            changed.append(f"{path} is gone")
        elif _digest(path) != digest:
            changed.append(f"{path} changed")
    return list(dict.fromkeys(changed))  # two factories of one file: the file said once


def load_factory(source: str) -> Callable[[], Any]:
    """Import the factory named by `source`. Raises UsageError with one line on any failure."""
    target, attr = split_source(source)
    try:
        module = _import_file(target) if target.endswith(".py") else _import_module(target)
    except UsageError:
        raise
    except Exception as exc:
        raise UsageError(
            f"workload {source!r}: importing {target} raised {type(exc).__name__}: {exc}{where_in_user_code(exc)}"
            f"{_not_found_hint(exc, target)}"
        ) from exc
    factory = getattr(module, attr, None)
    if factory is None:
        where = Path(target).name if target.endswith(".py") else target  # the full path is in the source already
        found = shadowed(target, attr, module) or choices(attr, factories(module))
        raise UsageError(f"workload {source!r}: {where} has no factory {attr!r}{found}")
    if not callable(factory):
        built = " (a workload built at import)" if isinstance(factory, UserWorkload) else ""
        raise UsageError(f"workload {source!r}: {attr} is not callable{built}: name a function that returns "
                         f"dlperf.user_workload(...), def make(): return ...")  # fmt: skip
    if why := not_a_factory(factory):
        raise UsageError(f"workload {source!r}: {attr} {why}; {WHAT_A_FACTORY}")
    return factory


OTHER_FRAMEWORKS = frozenset({"keras", "tensorflow", "tf_keras", "jax", "flax", "optax", "equinox", "haiku", "mxnet"})
ONLY_TORCH = ("your own models are PyTorch models (a torch.nn.Module); JAX, TensorFlow and MXNet are measured on "
              "dlperf's built-in networks (dlperf list), with --frameworks")  # fmt: skip


def _not_found_hint(exc: Exception, target: str) -> str:
    """Where dlperf's processes look for a module that was not found, when it is the user's own (not one it imports);
    a Keras or Flax model's file (`import keras` in dlperf's environment, which has none) says dlperf measures own
    models in PyTorch alone, rather than invite the user to install it there."""
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").partition(".")[0] in OTHER_FRAMEWORKS:
        return f" ({ONLY_TORCH})"
    if not isinstance(exc, ModuleNotFoundError) or target.endswith(".py") or exc.name != target.partition(".")[0]:
        return ""
    return (f" (dlperf's processes look in the working directory {os.getcwd()}, PYTHONPATH and the installed "
            "packages: run from the folder that holds it, put that folder on PYTHONPATH, or name its file, "
            "path/to/file.py:factory)")  # fmt: skip


WHAT_A_FACTORY = (
    "a factory is a function of your own, in your file or module, that takes no arguments (or data_dir) and returns "
    "dlperf.user_workload(...)"
)


def not_a_factory(factory: Callable[..., Any]) -> str | None:
    """Why `factory` cannot be a user's factory, checked before it is called: a class, a builtin, a generator or
    coroutine function, a function of dlperf, of the standard library or of an installed package that never uses
    dlperf (calling `dlperf:run`, `subprocess:run` or `IPython:embed` would run what it does inside the probe), one
    that requires arguments a factory is not given; None where none."""
    function = inspect.unwrap(factory.func if isinstance(factory, functools.partial) else factory)
    function = function.__func__ if inspect.ismethod(function) else function
    if inspect.isclass(function):
        return "is a class"
    if inspect.isroutine(function) and not inspect.isfunction(function):
        return "is a builtin function, not a Python one"
    owner = function if inspect.isfunction(function) else type(function)  # or a callable object: its class's
    if owner is not function and _a_model(owner):
        return (f"is a torch.nn.Module (a {owner.__qualname__}), not a factory: build it in one, def make(): "
                "return dlperf.user_workload('my-model', model, make_batch, loss, batch_size=...)")  # fmt: skip
    if why := whose(owner):
        named = f"{owner.__module__}.{owner.__qualname__}"
        return f"is {named if owner is function else f'an instance of {named}'}, {why}"
    if (
        inspect.isgeneratorfunction(function)
        or inspect.iscoroutinefunction(function)
        or inspect.isasyncgenfunction(function)
    ):
        return "is a generator or async function"
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    required = [p.name for p in parameters if p.default is p.empty and p.kind not in kinds]
    if extra := [name for name in required if name not in FACTORY_ARGUMENTS]:
        return f"requires {', '.join(extra)}, which dlperf cannot give it"
    return None


def _a_model(cls: type) -> bool:
    """Whether `cls` is a torch.nn.Module, told by its classes' names: this module never imports a framework."""
    return any(c.__name__ == "Module" and c.__module__.startswith("torch.nn") for c in cls.__mro__)


# what a factory may require: the --data DIR it is given, where it takes one
FACTORY_ARGUMENTS = frozenset({"data_dir"})


def whose(owner: Any) -> str | None:
    """Whose `owner` (a function, or a callable object's class) is where it is not the user's: dlperf's, the standard
    library's, an installed package's that never uses dlperf (`rich:print`); None where it may be the user's. Told
    by where its module was imported from, not by its name: a user's statistics.py is the user's."""
    from dlperf.workloads import userfiles

    name = owner.__module__ or ""
    top = name.partition(".")[0]
    if name.startswith(f"{userfiles.PACKAGE}."):  # a file of the user's, as dlperf imports it
        return None
    if top == "dlperf":
        return "dlperf's own, not yours"
    origin = origin_of(sys.modules.get(name), name)
    if origin == STANDARD:
        return f"{top}'s own, not yours"
    if origin == INSTALLED and not uses_dlperf(owner, sys.modules[name]):
        return f"of the installed package {top}, which never uses dlperf: no model factory"
    return None


STANDARD, INSTALLED = "the standard library", "an installed package"


@functools.cache
def _standard_dirs() -> frozenset[Path]:
    """The standard library's folders; sysconfig is imported here, not at load (`dlperf --help` loads this module)."""
    import sysconfig

    return frozenset(Path(sysconfig.get_path(k)).resolve() for k in ("stdlib", "platstdlib"))


def origin_of(module: Any, name: str) -> str | None:
    """`STANDARD` where `module` (imported as `name`) is the standard library's: built in, frozen, or a file under
    its folder; `INSTALLED` where it is a file of an installed package (site-packages, dist-packages); None where it
    is neither (the user's). A module not imported (None) or of no file (a namespace package) is told by its name."""
    spec = getattr(module, "__spec__", None)
    if getattr(spec, "origin", None) in ("built-in", "frozen"):
        return STANDARD
    if not (file := getattr(module, "__file__", None)):
        return STANDARD if name.partition(".")[0] in sys.stdlib_module_names else None
    path = Path(file).resolve()
    if {"site-packages", "dist-packages"} & set(path.parts):
        return INSTALLED
    return STANDARD if any(path.is_relative_to(d) for d in _standard_dirs()) else None


def uses_dlperf(owner: Any, module: Any) -> bool:
    """Whether an installed package's function can build a workload: its module holds dlperf or something of it
    (`import dlperf`, `from dlperf import user_workload`), or its own code names dlperf (imported in the function)."""
    held = (v.__name__ if inspect.ismodule(v) else v.__module__ for v in vars(module).values()
            if inspect.ismodule(v) or inspect.isfunction(v) or inspect.isclass(v))  # fmt: skip
    if any((n or "").partition(".")[0] == "dlperf" for n in held):
        return True
    return "dlperf" in _names(getattr(owner, "__code__", None))


def _names(code: Any) -> set[str]:
    """The global and attribute names `code` uses, its nested functions' too."""
    if code is None:
        return set()
    return set(code.co_names).union(*(_names(c) for c in code.co_consts if inspect.iscode(c)))


def shadowed(target: str, attr: str, module: Any) -> str:
    """' (TARGET is the standard library's module, at FILE: ...)' where the module imported for `target` is the
    standard library's, which a module of the user's of the same name does not replace; '' where it is not."""
    if target.endswith(".py") or origin_of(module, target) != STANDARD:
        return ""
    where = f", at {module.__file__}" if getattr(module, "__file__", None) else ""
    return (f" ({target} is the standard library's module{where}, the one imported here, not a module of yours of "
            f"that name: name your file instead, path/to/{target.replace('.', '/')}.py:{attr})")  # fmt: skip


def factories(module) -> list[str]:
    """The module's own functions a workload can be built by: defined there, public, requiring no argument."""
    found = []
    for name, value in vars(module).items():
        if inspect.isfunction(value) and value.__module__ == module.__name__ and not name.startswith("_"):
            required = [p.name for p in inspect.signature(value).parameters.values() if p.default is p.empty]
            if set(required) <= FACTORY_ARGUMENTS:
                found.append(name)
    return found


def factories_in_file(path: Path) -> list[str] | None:
    """`factories`, read from a file's source without running it (the parent imports no framework); None when the
    file cannot be read or parsed."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            required = positional[: len(positional) - len(a.defaults)]
            required += [k for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
            if {r.arg for r in required} <= FACTORY_ARGUMENTS:
                found.append(node.name)
    return found


def choices(word: str, names: list[str]) -> str:
    """' (did you mean ...?; its factories: ...)': the closest names to `word`, then every one."""
    close = difflib.get_close_matches(word, names, n=3, cutoff=0.6)
    mean = f"did you mean {' or '.join(map(repr, close))}?; " if close else ""
    listed = f"its factories: {', '.join(names)}" if names else "it defines no function of no arguments"
    return f" ({mean}{listed})"


def build_user_workload(source: str, data_dir: str | None = None, factory: Callable[..., Any] | None = None
                        ) -> UserWorkload:  # fmt: skip
    """The factory's workload; `data_dir` (--data DIR) given to a factory that takes a `data_dir` argument;
    `factory`: the one `load_factory(source)` gave, called again without the file run again."""
    factory = factory if factory is not None else load_factory(source)
    kwargs = factory_kwargs(factory, source, data_dir)
    try:
        built = factory(**kwargs)
    except Exception as exc:
        raise UsageError(
            f"workload {source!r}: the factory raised {type(exc).__name__}: {exc}{where_in_user_code(exc)}"
        ) from exc
    if not isinstance(built, UserWorkload):
        raise UsageError(
            f"workload {source!r}: the factory must return dlperf.user_workload(...), got {type(built).__name__}"
        )
    return built


def factory_kwargs(factory: Callable[..., Any], source: str, data_dir: str | None) -> dict[str, Any]:
    """{"data_dir": Path(DIR)} for a factory with a `data_dir` parameter under --data DIR, else nothing; a factory
    that requires it without --data DIR is refused in one line."""
    try:
        parameter = inspect.signature(factory).parameters.get("data_dir")
    except (TypeError, ValueError):  # a callable without a signature Python can read: called as it always was
        return {}
    if parameter is None:
        return {}
    if data_dir is not None:
        return {"data_dir": Path(data_dir)}
    if parameter.default is inspect.Parameter.empty:
        raise UsageError(f"workload {source!r}: {getattr(factory, '__name__', 'the factory')} takes data_dir, the "
                         "folder of your data: pass it with --data DIR (run, profile, optimize and advise take it), or "
                         "give data_dir a default for the commands that do not")  # fmt: skip
    return {}


def default_data_dir(factory: Callable[..., Any]) -> str | None:
    """The folder a factory reads without --data DIR: its `data_dir` parameter's default as Python evaluated it when
    the factory's file ran (`Path(__file__).parent / "photos"`, `os.environ.get("PHOTOS", ...)`: what its source
    does not say), absolute from this working directory, where every child builds the factory. None where it takes no
    `data_dir`, or its default is no path (`None`, chosen in the factory's body, which dlperf cannot see)."""
    try:
        parameter = inspect.signature(factory).parameters.get("data_dir")
    except (TypeError, ValueError):
        return None
    default = None if parameter is None else parameter.default
    folder = os.fspath(default) if isinstance(default, (str, os.PathLike)) else None
    return os.path.abspath(folder) if isinstance(folder, str) and folder else None


def _import_module(target: str):
    """The module `target` names, found on sys.path with the working directory last: dlperf's children start with
    `python -P` (`runner/launch.py`), so a user's statistics.py there never replaces the standard library's for
    dlperf's own imports, and is put back here for the user's `module:function`. A module of the working directory
    named as one the standard library has already imported (`statistics:make`) is the user's, imported by its file;
    a package of it so named (`test.model:make`, `code.model:make`), by its folder."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    top, _, rest = target.partition(".")
    module = importlib.import_module(top)
    if origin_of(module, top) != STANDARD:
        return importlib.import_module(target)
    from importlib.machinery import PathFinder

    mine = PathFinder.find_spec(top, [cwd])
    if mine is not None and mine.submodule_search_locations:  # a package: `test.model:make` from the user's test/
        package = _import_package(mine)
        return importlib.import_module(f"{package.__name__}.{rest}") if rest else package
    found = not rest and mine is not None and mine.has_location and str(mine.origin).endswith(".py")
    return _import_file(mine.origin, search=False) if found else importlib.import_module(target)


def _import_package(spec):
    """The user's package `spec` found, named as one of the standard library's: under a name of its own, as
    `_import_file` imports a file, its modules then imported below it (their relative imports work)."""
    from dlperf.workloads import userfiles

    folder = Path(next(iter(spec.submodule_search_locations)))
    name = userfiles.module_name(folder)
    if name in sys.modules:
        return sys.modules[name]
    mine = userfiles.spec_for(name, folder.resolve())
    module = importlib.util.module_from_spec(mine)
    sys.modules[name] = module
    if mine.loader is not None:
        mine.loader.exec_module(module)
    return module


def _import_file(path_text: str, search: bool = True):
    from dlperf.workloads import userfiles

    path = Path(path_text)
    if not path.is_file():
        raise UsageError(f"no such file {path_text!r}")
    name = userfiles.module_name(path)  # importable again by a DataLoader's spawned workers
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path_text!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    if search:
        sys.path.insert(0, str(path.parent))  # let the user's file import its neighbours
    spec.loader.exec_module(module)
    return module
