"""A small PyTorch training step on the GPU, for `causeway trace -- python3
workloads/py_torch_step.py` on a GPU host: its cudaMalloc calls (the caching
allocator growing) and synchronizations should resolve to the lines below.
Not run in CI (no GPU there); docs/python.md records what a run gave.
"""
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(1024, 4096)
        self.l2 = torch.nn.Linear(4096, 1024)

    def forward(self, x):
        h = torch.relu(self.l1(x))  # LINE: forward_l1
        return self.l2(h)  # LINE: forward_l2


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)  # LINE: step_forward
    loss.backward()  # LINE: step_backward
    opt.step()  # LINE: step_opt
    return loss


def main():
    model = Model().cuda()  # LINE: model_cuda
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i in range(3):
        x = torch.randn(512, 1024, device="cuda")  # LINE: batch
        y = torch.randn(512, 1024, device="cuda")
        train_step(model, opt, x, y)  # LINE: main_step
        torch.cuda.synchronize()  # LINE: sync


if __name__ == "__main__":
    main()
    import time
    time.sleep(0.3)  # let the tracer read code objects before exit
