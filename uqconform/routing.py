"""Metadata routing: the parameters given to a wrapper's ``fit`` reach the model it trains.

scikit-learn's opt-in metadata routing (``sklearn.set_config(enable_metadata_routing=True)``)
lets each model say which metadata it consumes (``model.set_fit_request(sample_weight=True)``)
and lets ``cross_validate``, ``GridSearchCV`` or a ``Pipeline`` deliver it. Every wrapper
whose ``fit`` trains a model inherits `RoutesFitParams`: it declares that its ``fit``
parameters go to that model's ``fit`` and, with routing on, passes on only what the model
requested (a parameter nobody requested is an error, as everywhere in scikit-learn). With
routing off, the default, ``fit`` parameters are passed on as given.

Examples
--------
>>> import numpy as np, sklearn
>>> from sklearn.linear_model import Ridge
>>> from sklearn.model_selection import cross_validate
>>> from uqconform.regression import SplitConformalRegressor
>>> rng = np.random.default_rng(0)
>>> X, y, w = rng.normal(size=(60, 2)), rng.normal(size=60), rng.uniform(1, 2, 60)
>>> with sklearn.config_context(enable_metadata_routing=True):
...     model = SplitConformalRegressor(Ridge().set_fit_request(sample_weight=True))
...     model = model.set_score_request(sample_weight=False)  # weights train, not score
...     scores = cross_validate(model, X, y, params={"sample_weight": w}, cv=3)
>>> scores["test_score"].shape
(3,)
"""

from __future__ import annotations

from typing import Any

from sklearn import get_config
from sklearn.frozen import FrozenEstimator
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping, process_routing

__all__ = ["RoutesFitParams", "routing_enabled"]


def routing_enabled() -> bool:
    """Whether scikit-learn's metadata routing is switched on.

    Returns
    -------
    bool
        ``enable_metadata_routing`` of scikit-learn's configuration (False by default).

    Examples
    --------
    >>> import sklearn
    >>> routing_enabled()
    False
    >>> with sklearn.config_context(enable_metadata_routing=True):
    ...     routing_enabled()
    True
    """
    return bool(get_config().get("enable_metadata_routing", False))


class RoutesFitParams:
    """Mixin of the wrappers whose ``fit(X, y, **fit_params)`` trains a model.

    Subclasses name the models ``fit`` parameters reach in `_routed_models` (default: the
    ``estimator``) and pass ``fit`` parameters through `_routed_fit_params`.

    Examples
    --------
    With routing on, a wrapper's ``fit`` consumes what its model requested:

    >>> import sklearn
    >>> from sklearn.linear_model import Ridge
    >>> from uqconform.regression import SplitConformalRegressor
    >>> issubclass(SplitConformalRegressor, RoutesFitParams)
    True
    >>> with sklearn.config_context(enable_metadata_routing=True):
    ...     ridge = Ridge().set_fit_request(sample_weight=True)
    ...     router = SplitConformalRegressor(ridge).get_metadata_routing()
    ...     router.consumes("fit", ["sample_weight", "groups"])
    {'sample_weight'}
    """

    def _routed_models(self) -> dict[str, Any]:
        """The models that receive ``fit`` parameters, by name (empty: none)."""
        return {"estimator": self._estimator_or_default()}  # type: ignore[attr-defined]

    def get_metadata_routing(self) -> MetadataRouter:
        """How metadata given to this wrapper is routed (scikit-learn's routing API).

        Returns
        -------
        MetadataRouter
            The wrapper's own requests (``score``'s ``sample_weight``) and, for ``fit``, the
            requests of the model(s) it trains.
        """
        router = MetadataRouter(owner=self).add_self_request(self)
        for name, model in self._routed_models().items():
            router.add(
                **{name: model}, method_mapping=MethodMapping().add(caller="fit", callee="fit")
            )
        return router

    def _routed_fit_params(self, fit_params: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The ``fit`` parameters of each model of `_routed_models`: all of them with routing
        off; with routing on, those the model requested, under the names it requested them
        (one that no model requested raises scikit-learn's error). Any parameter given for
        a ``FrozenEstimator``, which is not trained, raises."""
        names = self._routed_models()
        for name, model in names.items():
            if fit_params and isinstance(model, FrozenEstimator):
                raise ValueError(
                    f"fit parameters {sorted(fit_params)} were given, but `{name}` is a "
                    "FrozenEstimator, which fit does not retrain: drop them, or pass the "
                    "unfrozen model to have it trained with them."
                )
        if not routing_enabled():
            return {name: fit_params for name in names}
        routed = process_routing(self, "fit", **fit_params)
        return {name: dict(routed[name]["fit"]) for name in names}
