"""SONNXModel: an imported ONNX graph as a trainable singa Model.

The floating-point initializers become the model's parameters (named as in
the ONNX file) and BatchNormalization's running statistics its states, so
get_params / set_states / save_states / optimizers all work on them. The
graph runs through autograd, so the model can be fine-tuned and exported
again with sonnx.export_model.
"""

from singa import autograd
from singa import model as singa_model
from singa import tensor
from singa._onnx.importer import SingaRep

# Input slots whose (float) initializers steer an op instead of being
# learnt: running statistics, clip bounds, dropout ratio, pad value,
# resize scales.
_STATE_SLOTS = {"BatchNormalization": {3, 4}}
_CONSTANT_SLOTS = {"Clip": {1, 2}, "Dropout": {1}, "Pad": {2}, "Resize": {1, 2, 3},
                   "Upsample": {1}, "Range": {0, 1, 2}, "ConstantOfShape": {0}}


def _roles(model):
    """Initializer name -> 'param', 'state' or 'const'."""
    uses = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if not name:
                continue
            if i in _STATE_SLOTS.get(node.op_type, ()):
                role = "state"
            elif i in _CONSTANT_SLOTS.get(node.op_type, ()):
                role = "const"
            else:
                role = "param"
            uses.setdefault(name, set()).add(role)
    roles = {}
    for name, rs in uses.items():
        roles[name] = "param" if "param" in rs else ("state" if "state" in rs else "const")
    return roles


class SONNXModel(singa_model.Model):
    """A singa Model that runs (and can train) an ONNX model.

    Args:
        onnx_model: an onnx.ModelProto, its bytes or a file path.
        device: a singa device (default CPU).

    ``forward(*inputs, aux_output=(), last_layers=-1)`` returns a list, as
    in SINGA: the graph's outputs, then the values named in aux_output;
    last_layers picks the last node to run, as Python indexes (-2 drops
    the last node, e.g. a classifier to replace; its input is returned).
    The default ``train_one_batch(x, y)`` minimises softmax cross-entropy
    of the first output against y with the model's optimizer; override it
    for other losses, as with any Model.
    """

    def __init__(self, onnx_model, device=None):
        super().__init__()
        rep = SingaRep(onnx_model, device, trainable=True)
        roles = _roles(rep.model)
        params, states = {}, {}
        for name, t in rep.params.items():
            role = roles.get(name, "const")
            if role == "param" and t.ndim() > 0:
                params[name] = t
            else:
                t.requires_grad = False
                t.stores_grad = False
                if role == "state":
                    states[name] = t
        self.__dict__["_rep"] = rep
        self.__dict__["_onnx_params"] = params
        self.__dict__["_onnx_states"] = states
        # The parameters exist already: nothing to initialise lazily.
        self.__dict__["_initialized"] = True

    @property
    def sg_ir(self):
        """The prepared graph (SINGA's attribute name): a SingaRep."""
        return self._rep

    @property
    def input_names(self):
        return list(self._rep.input_names)

    @property
    def output_names(self):
        return list(self._rep.output_names)

    def _collect(self, with_states):
        out = dict(self._onnx_params)
        if with_states:
            out.update(self._onnx_states)
        out.update(super()._collect(with_states))
        return out

    def forward(self, *input, aux_output=(), last_layers=-1, **kwargs):
        rep = self._rep
        rep.training = autograd.training
        try:
            return rep.run(list(input), aux_output=aux_output, last_layers=last_layers,
                           **kwargs)
        finally:
            rep.training = False

    def train_one_batch(self, x, y):
        if self.optimizer is None:
            raise ValueError("SONNXModel.train_one_batch: call set_optimizer() first")
        out = self.forward(x)[0]
        if not isinstance(y, tensor.Tensor):
            y = tensor.from_numpy(y, out.device)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss
