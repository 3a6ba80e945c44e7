"""Conformal classification: split LAC/APS/RAPS/top-k sets, class-conditional and Mondrian."""

from uqconform.classification.ensemble import EnsembleConformalClassifier
from uqconform.classification.heads import HeadEnsemble
from uqconform.classification.multidim import MultiDimScoreClassifier
from uqconform.classification.split import SplitConformalClassifier

__all__ = [
    "EnsembleConformalClassifier",
    "HeadEnsemble",
    "MultiDimScoreClassifier",
    "SplitConformalClassifier",
]
