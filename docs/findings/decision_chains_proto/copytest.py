import torch, time, sys
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.set_num_threads(1); torch.manual_seed(0)
L=int(sys.argv[1]); lr=float(sys.argv[2]); attn=sys.argv[3] if len(sys.argv)>3 else 'sdpa'
cfg=Qwen2Config(vocab_size=512,hidden_size=128,intermediate_size=512,num_hidden_layers=L,num_attention_heads=4,num_key_value_heads=4,max_position_embeddings=256,tie_word_embeddings=True)
cfg._attn_implementation=attn
m=Qwen2ForCausalLM(cfg); opt=torch.optim.AdamW(m.parameters(),lr=lr,betas=(0.9,0.95))
def batch(n=32,k=12):
    x=torch.randint(10,500,(n,k)); sep=torch.full((n,1),3)
    return torch.cat([torch.randint(10,500,(n,20)),x,sep,x],1)
t=time.time()
for s in range(1501):
    b=batch(); out=m(input_ids=b,labels=b)
    opt.zero_grad(); out.loss.backward(); opt.step()
    if s%250==0:
        with torch.no_grad():
            b=batch(64); lg=m(input_ids=b).logits; k=12
            pred=lg[:,-k-1:-1].argmax(-1); acc=(pred==b[:,-k:]).float().mean().item()
        print(s, round(out.loss.item(),3), 'copy acc', round(acc,3), f'{time.time()-t:.0f}s', flush=True)
