"""True induction: random distinct tokens, then queries x_i -> x_{i+1} at random positions (no fixed offset)."""
import torch, time, sys
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.set_num_threads(1); torch.manual_seed(0)
L=int(sys.argv[1]); lr=float(sys.argv[2]); steps=int(sys.argv[3])
cfg=Qwen2Config(vocab_size=512,hidden_size=128,intermediate_size=512,num_hidden_layers=L,num_attention_heads=4,num_key_value_heads=4,max_position_embeddings=256,tie_word_embeddings=True)
m=Qwen2ForCausalLM(cfg); opt=torch.optim.AdamW(m.parameters(),lr=lr,betas=(0.9,0.95))
def batch(n=32,k=30,q=10):
    seq=torch.stack([torch.randperm(490)[:k]+10 for _ in range(n)])
    idx=torch.randint(0,k-1,(n,q))
    qs=torch.gather(seq,1,idx); ans=torch.gather(seq,1,idx+1)
    qa=torch.stack([qs,ans],2).reshape(n,2*q)
    x=torch.cat([seq,torch.full((n,1),3),qa],1)
    lab=torch.full_like(x,-100); lab[:,k+2::2]=x[:,k+2::2]
    return x,lab
t=time.time()
for s in range(steps+1):
    x,lab=batch(); out=m(input_ids=x,labels=lab)
    opt.zero_grad(); out.loss.backward(); opt.step()
    if s%250==0:
        with torch.no_grad():
            x,lab=batch(64); lg=m(input_ids=x).logits
            pred=lg[:,:-1].argmax(-1); tgt=lab[:,1:]; mask=tgt!=-100
            acc=(pred[mask]==tgt[mask]).float().mean().item()
        print(s, round(out.loss.item(),3), 'induction acc', round(acc,3), f'{time.time()-t:.0f}s', flush=True)
