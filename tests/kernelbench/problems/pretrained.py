# A problem in the form of KernelBench's level 4: a pretrained Hugging Face model built at import.
import torch
from transformers import AutoConfig, AutoModelForCausalLM

model_name = "org/some-small-model"
config = AutoConfig.from_pretrained(model_name)


class Model(torch.nn.Module):
    def __init__(self, model_name, config):
        super().__init__()
        self.model = AutoModelForCausalLM.from_pretrained(model_name, config=config)

    def forward(self, x):
        return self.model(x).logits


def get_inputs():
    return [torch.randint(0, 100, (2, 8))]


def get_init_inputs():
    return [model_name, config]
