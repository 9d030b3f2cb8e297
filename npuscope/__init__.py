"""npuscope: a terminal explorer for Huawei Ascend NPU profiles."""

__version__ = "0.1.0"
