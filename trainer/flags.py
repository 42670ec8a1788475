"""``tf.flags`` / ``tf.app.flags`` and ``tf.app.run``: command-line flags as TF1 scripts declare them.

``DEFINE_string("data_dir", "/tmp", "help")`` registers a flag; ``FLAGS.data_dir`` reads it, parsing
``sys.argv`` (``--data_dir=/x``, ``--data_dir /x``, ``--flag``/``--noflag`` for booleans) on first
access; ``app.run(main)`` parses and calls ``main(remaining_argv)``.

>>> flags = FlagValues()
>>> DEFINE_integer("steps", 10, "training steps", flag_values=flags)
>>> DEFINE_boolean("fast", False, "", flag_values=flags)
>>> flags(["prog", "--steps=5", "--fast", "extra"]), flags.steps, flags.fast
(['prog', 'extra'], 5, True)
"""

from __future__ import annotations

import sys
from typing import Any, Callable

__all__ = ["DEFINE_bool", "DEFINE_boolean", "DEFINE_enum", "DEFINE_float", "DEFINE_integer", "DEFINE_list",
           "DEFINE_string", "FLAGS", "FlagValues", "FlagsError", "run"]


class FlagsError(ValueError):
    """A flag given a value it cannot take, or a flag defined twice."""


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "t", "1", "yes"):
        return True
    if lowered in ("false", "f", "0", "no"):
        return False
    raise FlagsError(f"expected a boolean, got {text!r}")


class FlagValues:
    """The registered flags; attribute access parses ``sys.argv`` the first time."""

    def __init__(self):
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_parsed", False)

    def define(self, name: str, default, help_text: str, parse: Callable[[str], Any], is_bool: bool = False):
        if name in self._flags:
            raise FlagsError(f"flag --{name} is defined twice")
        self._flags[name] = {"value": default, "default": default, "help": help_text, "parse": parse,
                             "bool": is_bool}

    def __call__(self, argv: list[str]) -> list[str]:
        """Parse known flags out of ``argv``; returns the program name and the arguments left."""
        rest = [argv[0]] if argv else []
        args = list(argv[1:])
        while args:
            arg = args.pop(0)
            if arg == "--":
                rest.extend(args)
                break
            if not arg.startswith("-") or arg == "-":
                rest.append(arg)
                continue
            name, eq, value = arg.lstrip("-").partition("=")
            flag = self._flags.get(name)
            if flag is None and name.startswith("no") and self._flags.get(name[2:], {}).get("bool") and not eq:
                self._flags[name[2:]]["value"] = False
                continue
            if flag is None:
                rest.append(arg)
                continue
            if not eq:
                if flag["bool"]:
                    flag["value"] = True
                    continue
                if not args:
                    raise FlagsError(f"flag --{name} needs a value")
                value = args.pop(0)
            try:
                flag["value"] = flag["parse"](value)
            except (ValueError, FlagsError) as e:
                raise FlagsError(f"flag --{name}: {e}") from None
        object.__setattr__(self, "_parsed", True)
        return rest

    def __getattr__(self, name: str):
        flags = object.__getattribute__(self, "_flags")
        if name not in flags:
            raise AttributeError(f"no flag --{name} is defined; defined: {sorted(flags)}")
        if not object.__getattribute__(self, "_parsed"):
            self(sys.argv)
        return flags[name]["value"]

    def __setattr__(self, name: str, value) -> None:
        if name not in self._flags:
            raise AttributeError(f"no flag --{name} is defined")
        self._flags[name]["value"] = value

    def __contains__(self, name: str) -> bool:
        return name in self._flags

    def flag_values_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._flags}


FLAGS = FlagValues()


def _definer(parse, is_bool=False):
    def define(name: str, default, help: str = "", flag_values: FlagValues = FLAGS, **kwargs) -> None:  # noqa: A002
        flag_values.define(name, default, help, parse, is_bool)

    return define


DEFINE_string = _definer(str)
DEFINE_integer = _definer(int)
DEFINE_float = _definer(float)
DEFINE_boolean = DEFINE_bool = _definer(_parse_bool, is_bool=True)
DEFINE_list = _definer(lambda text: [p for p in text.split(",") if p])


def DEFINE_enum(name: str, default, enum_values, help: str = "", flag_values: FlagValues = FLAGS,  # noqa: A002,N802
                **kwargs) -> None:
    def parse(text):
        if text not in enum_values:
            raise FlagsError(f"must be one of {list(enum_values)}, got {text!r}")
        return text

    flag_values.define(name, default, help, parse)


def run(main: Callable | None = None, argv: list[str] | None = None):
    """``tf.app.run``: parse the flags, call ``main(remaining argv)``, exit with its return value."""
    rest = FLAGS(list(argv) if argv is not None else sys.argv)
    if main is None:
        main = sys.modules["__main__"].main
    sys.exit(main(rest))
