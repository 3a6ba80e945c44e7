"""Conformity scores: each is a pair of a score and its inverse (the prediction set)."""

from uqconform.scores.classification import (
    APSScore,
    ClassificationScore,
    LACScore,
    RAPSScore,
    SAPSScore,
    TopKScore,
    get_classification_score,
)
from uqconform.scores.regression import (
    AbsoluteScore,
    CQRScore,
    NormalizedScore,
    RegressionScore,
    SignedResidualScore,
    get_regression_score,
)

__all__ = [
    "APSScore",
    "AbsoluteScore",
    "CQRScore",
    "ClassificationScore",
    "LACScore",
    "NormalizedScore",
    "RAPSScore",
    "RegressionScore",
    "SAPSScore",
    "SignedResidualScore",
    "TopKScore",
    "get_classification_score",
    "get_regression_score",
]
