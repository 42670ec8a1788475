"""``tf.make_template``: a function whose variables are created on its first call and shared by
every later call, through one variable scope (TensorFlow 1.15's ``Template``).

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     scale = tf.make_template("scale", lambda x: x * tf.get_variable("w", [], initializer=tf.ones_initializer()))
...     a, b = scale(tf.constant(2.0)), scale(tf.constant(3.0))
>>> [v.name for v in g.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)]
['scale/w:0']
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from trainer.graph import GraphKeys, get_default_graph
from trainer.variable_scopes import VariableScope, variable_scope

__all__ = ["Template", "make_template"]


class Template:
    """Calls ``func`` in its own variable scope: creating variables the first time, reusing them after."""

    def __init__(self, name: str, func: Callable, create_scope_now: bool = False, unique_name: str | None = None):
        if name is None:
            raise ValueError("name cannot be None.")
        self._func, self._name, self._unique_name = func, name, unique_name
        self._variable_scope: VariableScope | None = None
        self._variables_created = False
        if create_scope_now:
            with variable_scope(unique_name, default_name=None if unique_name else name) as scope:
                self._variable_scope = scope

    def __call__(self, *args, **kwargs):
        if self._variable_scope is not None:
            with variable_scope(self._variable_scope, reuse=True if self._variables_created else None):
                return self._call_func(args, kwargs)
        with variable_scope(self._unique_name, default_name=None if self._unique_name else self._name) as scope:
            self._variable_scope = scope
            return self._call_func(args, kwargs)

    def _call_func(self, args, kwargs):
        g = get_default_graph()
        trainable_before = len(g.get_collection(GraphKeys.TRAINABLE_VARIABLES))
        result = self._func(*args, **kwargs)
        if self._variables_created:
            trainable = g.get_collection(GraphKeys.TRAINABLE_VARIABLES)
            if len(trainable) != trainable_before:
                raise ValueError("Trainable variable created when calling a template after the first time, perhaps "
                                 "you used tf.Variable when you meant tf.get_variable: "
                                 f"{[v.name for v in trainable[trainable_before:]]}")
        self._variables_created = True
        return result

    @property
    def name(self) -> str:
        return self._name

    @property
    def func(self) -> Callable:
        return self._func

    @property
    def variable_scope(self) -> VariableScope | None:
        return self._variable_scope

    @property
    def variable_scope_name(self) -> str | None:
        return None if self._variable_scope is None else self._variable_scope.name

    def _collected(self, key: str) -> list:
        if self._variable_scope is None:
            return []
        return get_default_graph().get_collection(key, re.escape(self._variable_scope.name + "/"))

    @property
    def global_variables(self) -> list:
        return self._collected(GraphKeys.GLOBAL_VARIABLES)

    variables = global_variables

    @property
    def trainable_variables(self) -> list:
        return self._collected(GraphKeys.TRAINABLE_VARIABLES)

    @property
    def non_trainable_variables(self) -> list:
        trainable = set(map(id, self.trainable_variables))
        return [v for v in self.global_variables if id(v) not in trainable]

    @property
    def local_variables(self) -> list:
        return self._collected(GraphKeys.LOCAL_VARIABLES)


def make_template(name_: str, func_: Callable, create_scope_now_: bool = False, unique_name_: str | None = None,
                  custom_getter_=None, **kwargs) -> Template:
    """``func_`` (with ``kwargs`` bound) wrapped so that all its calls share one set of variables,
    created by ``tf.get_variable`` on the first call under the scope ``name_`` (made unique), or
    ``unique_name_`` exactly; ``create_scope_now_`` opens the scope here rather than at that call."""
    if custom_getter_ is not None:
        raise NotImplementedError("make_template: custom_getter_ is not supported (variable_scope has no custom "
                                  "getters in flowstack)")
    if kwargs:
        func_ = functools.partial(func_, **kwargs)
    return Template(name_, func_, create_scope_now=create_scope_now_, unique_name=unique_name_)
